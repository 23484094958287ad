#!/bin/sh
# Runs every hand-written oracle (<name>.py, one per ../programs/<name>.ir),
# then the independent IR model (irsim.py: canonical form, verification and
# every run line interpreted). Fails on any mismatch or missing oracle.
set -u
export PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$0")" || exit 2
status=0
for ir in ../programs/*.ir; do
    name=$(basename "$ir" .ir)
    if [ ! -f "$name.py" ]; then
        echo "MISSING oracle for $name"
        status=1
        continue
    fi
    if grep -q '^# run.*?' "$ir"; then
        echo "UNFILLED '?' in $ir"
        status=1
    fi
    python3 "$name.py" || { echo "FAIL $name.py"; status=1; }
done
python3 irsim.py || status=1
if [ "$status" -eq 0 ]; then
    echo "all oracles agree"
fi
exit $status
