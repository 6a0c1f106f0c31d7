set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=$PWD/.carry/py
PYTHONPATH=$P python3 -c "import spillway; print(spillway.__version__, spillway.cuda_available())"
cd tests/python && PYTHONPATH=$P timeout 200 python3 -m pytest -q -rs -p no:cacheprovider test_dlpack.py test_shuffle.py test_basics.py test_arrow.py test_mpi.py 2>&1 | tail -25
