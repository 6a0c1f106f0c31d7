#include <spillway/table/generator.hpp>

#include <spillway/core/error.hpp>

#include "table/detail/cpu_threads.hpp"
#include "table/detail/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace spillway {

namespace {
/// The cumulative weights of a Zipf law over [0, n), for drawing by inversion.
std::vector<double> zipf_cdf(double s, std::uint64_t n) {
  SPILLWAY_EXPECTS(n <= (std::uint64_t{1} << 26),
                   "random_table: a Zipf law takes at most 2^26 distinct values");
  std::vector<double> cdf(n);
  double sum = 0;
  for (std::uint64_t v = 0; v < n; ++v)
    cdf[v] = sum += 1.0 / std::pow(static_cast<double>(v + 1), s);
  for (double& c : cdf) c /= sum;
  return cdf;
}

std::uint64_t draw(std::mt19937_64& rng, const RandomTableOptions& o,
                   const std::vector<double>& cdf) {
  if (o.skew > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < o.skew) return 0;
  if (!cdf.empty()) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const auto it = std::lower_bound(cdf.begin(), cdf.end(), u);
    return static_cast<std::uint64_t>(
        std::min<std::ptrdiff_t>(it - cdf.begin(), std::ssize(cdf) - 1));
  }
  const std::uint64_t v = rng();
  return o.key_cardinality > 0 ? v % o.key_cardinality : v;
}
}  // namespace

Table random_table(const RandomTableOptions& o, BufferResource& br) {
  SPILLWAY_EXPECTS(o.null_fraction >= 0 && o.null_fraction <= 1 && o.skew >= 0 && o.skew <= 1,
                   "null_fraction and skew must be within [0, 1]");
  SPILLWAY_EXPECTS(o.min_string <= o.max_string, "min_string must not exceed max_string");
  SPILLWAY_EXPECTS(o.zipf >= 0, "zipf must not be negative");
  const std::vector<double> cdf =
      o.zipf > 0 ? zipf_cdf(o.zipf, o.key_cardinality > 0 ? o.key_cardinality : 1U << 20)
                 : std::vector<double>{};
  std::vector<Column> columns;
  std::vector<std::string> names;
  for (std::size_t c = 0; c < o.types.size(); ++c) {
    const DataType type = o.types[c];
    std::mt19937_64 rng(o.seed * 1000003 + c);
    std::unique_ptr<Buffer> mask;
    if (o.null_fraction > 0) {
      mask = br.allocate(MemoryType::HOST, mask_bytes(o.rows));
      auto* m = reinterpret_cast<std::uint8_t*>(mask->data());
      if (mask->size() > 0) std::memset(m, 0, mask->size());
      std::bernoulli_distribution valid(1 - o.null_fraction);
      for (std::size_t i = 0; i < o.rows; ++i) {
        if (valid(rng)) m[i / 8] = static_cast<std::uint8_t>(m[i / 8] | (1U << (i % 8)));
      }
    }
    if (type == TypeId::STRING) {
      std::vector<std::int32_t> off(o.rows + 1, 0);
      std::string chars;
      for (std::size_t i = 0; i < o.rows; ++i) {
        const std::uint64_t key = draw(rng, o, cdf);
        // The same key always gives the same string, so cardinality and skew carry over.
        std::mt19937_64 krng(key);
        const std::size_t n = o.min_string + krng() % (o.max_string - o.min_string + 1);
        for (std::size_t k = 0; k < n; ++k) chars.push_back(static_cast<char>('a' + krng() % 26));
        SPILLWAY_EXPECTS(chars.size() <= static_cast<std::size_t>(INT32_MAX),
                         "random_table: too many characters for int32 offsets");
        off[i + 1] = static_cast<std::int32_t>(chars.size());
      }
      auto data = br.allocate(MemoryType::HOST, chars.size());
      if (!chars.empty()) std::memcpy(data->data(), chars.data(), chars.size());
      auto offsets = br.allocate(MemoryType::HOST, off.size() * sizeof(std::int32_t));
      std::memcpy(offsets->data(), off.data(), offsets->size());
      columns.emplace_back(type, o.rows, std::move(data), std::move(offsets), std::move(mask));
    } else {
      const std::size_t w = size_of(type);
      auto data = br.allocate(MemoryType::HOST, o.rows * w);
      for (std::size_t i = 0; i < o.rows; ++i) {
        std::uint64_t v = draw(rng, o, cdf);
        if (type == TypeId::BOOL8) v &= 1;
        if (type == TypeId::FLOAT32) {
          const float f = static_cast<float>(static_cast<std::int64_t>(v)) * 0.5F;
          std::memcpy(data->data() + i * w, &f, w);
        } else if (type == TypeId::FLOAT64) {
          const double d = static_cast<double>(static_cast<std::int64_t>(v)) * 0.25;
          std::memcpy(data->data() + i * w, &d, w);
        } else if (type == TypeId::DECIMAL128) {
          // A function of the drawn value, so cardinality and skew carry over; the low half
          // spread over 64 bits (sums carry into the high half), the high half -2 to 1.
          const Int128 d{v * 0x9E3779B97F4A7C15ULL, static_cast<std::int64_t>(v & 3) - 2};
          std::memcpy(data->data() + i * w, &d, w);
        } else {
          std::memcpy(data->data() + i * w, &v, w);  // little-endian: the low bytes
        }
      }
      columns.emplace_back(type, o.rows, std::move(data), nullptr, std::move(mask));
    }
    names.push_back("c" + std::to_string(c));
  }
  return Table(std::move(columns), std::move(names));
}

Table random_int32_table(std::size_t rows, std::size_t columns, std::int32_t min, std::int32_t max,
                         std::uint64_t seed, BufferResource& br) {
  const std::uint64_t range = spillway::detail::random_int32_range(min, max);
  std::vector<Column> cols;
  std::vector<std::string> names;
  for (std::size_t c = 0; c < columns; ++c) {
    auto data = br.allocate(MemoryType::HOST, rows * sizeof(std::int32_t));
    auto* v = reinterpret_cast<std::int32_t*>(data->data());
    detail::parallel_ranges(rows, 0, [&](std::size_t, std::size_t a, std::size_t b) {
      for (std::size_t i = a; i < b; ++i) v[i] = detail::random_int32(seed, c, i, min, range);
    });
    cols.emplace_back(TypeId::INT32, rows, std::move(data));
    names.push_back("c" + std::to_string(c));
  }
  return Table(std::move(cols), std::move(names));
}

}  // namespace spillway
