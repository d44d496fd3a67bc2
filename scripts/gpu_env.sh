# Sourced by the GPU scripts (gpu_check.sh, gpu_train.sh, gpu_loop.sh) on the lent device machine, from the
# repository's root: the carried wheels (.whl/: cshogi, which the device's image lacks) installed into /tmp/site,
# the checkout on PYTHONPATH, and the compiled search tree walk and encoder planes built in place (pip builds them
# on install; without a compiler that part runs its numpy code, and the scripts' rows say so). Prints the GPU.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
read -r inc suffix < <(python3 -c "import sysconfig as s; print(s.get_paths()['include'], s.get_config_var('EXT_SUFFIX'))")
for ext in search/_puct encoding/_planes; do
  cc -O2 -ffp-contract=off -shared -fPIC -I"$inc" "dlzero/$ext.c" -o "dlzero/$ext$suffix" \
    || echo "$(basename "$0"): dlzero/$ext.c did not build; that part runs its numpy code" >&2
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
