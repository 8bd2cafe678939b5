# Sourced by the Nsight Compute probes (probe_ncu.sh, probe_ncu_source.sh) from the repo root:
# pydantic from .whl (as external_h200.sh), perfsim importable as a linked package tree (the
# cute/tutorial/flex cases import it), and NCU set to the ncu binary (its version printed).
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
echo "ncu: $NCU"; "$NCU" --version | tail -1
