# Sourced by the device scripts (probe_energy_run.sh, probe_tile_walk_groups.sh) from the
# repository root: installs the carried pydantic wheels (.whl/) into /tmp/site if needed and
# links the working tree as the package perfsim (perfsim.validate, perfsim.catalog) under
# /tmp/shim, on PYTHONPATH.
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site
