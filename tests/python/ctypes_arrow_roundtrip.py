"""Arrow C Data Interface round trips against a real Arrow implementation (pyarrow).

Usage: python3 ctypes_arrow_roundtrip.py /path/to/libspillway_arrow_test.so
"""
import ctypes
import sys
import unittest

try:
    import pyarrow as pa
except ImportError:  # the test command installs it; without it this test is skipped
    print("pyarrow is not installed: skipped")
    sys.exit(77)

LIB = ctypes.CDLL(sys.argv.pop(1))
LIB.spillway_test_roundtrip.restype = ctypes.c_int
SCHEMA_SIZE, ARRAY_SIZE = 72, 80  # sizeof(ArrowSchema), sizeof(ArrowArray)


def roundtrip(batch):
    """Exports `batch` to C, runs it through spillway, imports the result."""
    schema_in, array_in = ctypes.create_string_buffer(SCHEMA_SIZE), ctypes.create_string_buffer(ARRAY_SIZE)
    schema_out, array_out = ctypes.create_string_buffer(SCHEMA_SIZE), ctypes.create_string_buffer(ARRAY_SIZE)
    batch._export_to_c(ctypes.addressof(array_in), ctypes.addressof(schema_in))
    rows, total = ctypes.c_uint64(), ctypes.c_uint64()
    err = ctypes.create_string_buffer(1024)
    rc = LIB.spillway_test_roundtrip(schema_in, array_in, schema_out, array_out, ctypes.byref(rows),
                                     ctypes.byref(total), err, ctypes.c_size_t(len(err)))
    if rc != 0:
        raise RuntimeError(err.value.decode())
    out = pa.RecordBatch._import_from_c(ctypes.addressof(array_out), ctypes.addressof(schema_out))
    return out, rows.value


def mixed_batch(n):
    ints = [None if i % 7 == 3 else i * 1000003 % 2**31 for i in range(n)]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([i % 100 - 50 for i in range(n)], pa.int8()),
            pa.array([i * 7 for i in range(n)], pa.int16()),
            pa.array(ints, pa.int32()),
            pa.array([None if i % 5 == 0 else -i * 2**40 for i in range(n)], pa.int64()),
            pa.array([i % 256 for i in range(n)], pa.uint8()),
            pa.array([i for i in range(n)], pa.uint16()),
            pa.array([i * 3 for i in range(n)], pa.uint32()),
            pa.array([2**63 + i for i in range(n)], pa.uint64()),
            pa.array([None if i % 4 == 1 else i * 0.5 for i in range(n)], pa.float32()),
            pa.array([-0.0 if i == 0 else i / 3 for i in range(n)], pa.float64()),
            pa.array([None if i % 3 == 2 else i % 2 == 0 for i in range(n)], pa.bool_()),
            pa.array([None if i % 6 == 5 else ("" if i % 4 == 0 else "ü" * (i % 5) + str(i)) for i in range(n)],
                     pa.string()),
        ],
        names=["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "flag", "name"],
    )


class ArrowRoundTrip(unittest.TestCase):
    def test_every_type_with_nulls_and_empty_strings(self):
        batch = mixed_batch(1000)
        out, rows = roundtrip(batch)
        self.assertEqual(rows, 1000)
        self.assertTrue(out.equals(batch), f"{out.to_pydict()} != {batch.to_pydict()}")

    def test_empty_and_one_row(self):
        for n in (0, 1):
            batch = mixed_batch(n)
            out, rows = roundtrip(batch)
            self.assertEqual(rows, n)
            self.assertTrue(out.equals(batch))

    def test_sliced_batch_with_unaligned_offset(self):
        batch = mixed_batch(100).slice(3, 50)  # validity bits and offsets start mid-buffer
        out, rows = roundtrip(batch)
        self.assertEqual(rows, 50)
        self.assertTrue(out.equals(batch))

    def test_unsupported_type_is_a_clear_error(self):
        batch = pa.RecordBatch.from_arrays(
            [pa.array([1, 2], pa.int32()), pa.array([1, 2], pa.timestamp("us", tz="UTC"))],
            names=["ok", "when"])
        with self.assertRaises(RuntimeError) as ctx:
            roundtrip(batch)
        message = str(ctx.exception)
        self.assertIn("'when'", message)
        self.assertIn("'tsu:UTC'", message)

    def test_decimals_dates_and_timestamps_round_trip(self):
        import decimal
        batch = pa.RecordBatch.from_arrays(
            [pa.array([decimal.Decimal("-1.25"), None, decimal.Decimal("12345678901234567890.5")],
                      pa.decimal128(30, 2)),
             pa.array([1, None, 19000], pa.date32()),
             pa.array([-5, 7, None], pa.timestamp("ns"))], names=["d", "day", "ts"])
        out, rows = roundtrip(batch)
        self.assertEqual(rows, 3)
        self.assertTrue(out.equals(batch))

    def test_large_strings_come_back_as_utf8(self):
        values = ["a", None, "a longer string than twelve bytes"]
        batch = pa.RecordBatch.from_arrays([pa.array(values, pa.large_string())], names=["s"])
        back, rows = roundtrip(batch)
        self.assertEqual(rows, 3)
        self.assertEqual(back.column(0).type, pa.string())
        self.assertEqual(back.column(0).to_pylist(), values)


if __name__ == "__main__":
    unittest.main(verbosity=1)
