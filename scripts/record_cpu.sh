#!/usr/bin/env bash
# Re-records the CPU world, docs/runs/cpu, from the committed code: every notebook with the ci profile into a fresh
# run folder, then scripts/record_run.py (which refuses a run whose code no commit has), then the generated docs.
#
#   scripts/record_cpu.sh            (about the time of a ci series; README's "Recordings" says how long)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain -- notebooks helpers scripts)" ]; then
  echo "record_cpu.sh: notebooks/, helpers/ or scripts/ differ from the last commit: commit them first" >&2
  exit 1
fi
STAMP=$(date +%Y%m%d-%H%M%S)
RUN_DIR=runs/record-cpu-$STAMP
# the recording shows what its own notebooks made (04 lists the repository it finds): models/ and build/ start empty;
# what an earlier run left there is moved aside, not deleted
ASIDE=runs/record-cpu-$STAMP-before
for folder in models build; do
  if [ -e "$folder" ]; then mkdir -p "$ASIDE" && mv "$folder" "$ASIDE/" && echo "record_cpu.sh: $folder/ moved to $ASIDE/"; fi
done
tracked=$(git ls-files models build)  # the repository's own files there (models/README.md) come back
[ -z "$tracked" ] || git checkout -- $tracked
./tutorial series --profile ci --run-dir "$RUN_DIR"
.venv/bin/python scripts/record_run.py "$RUN_DIR" cpu
.venv/bin/python scripts/benchmark_numbers.py --write
git status --short docs README.md solutions
