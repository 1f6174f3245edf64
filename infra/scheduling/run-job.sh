#!/usr/bin/env bash
# Run one medallion job through spark-submit, with the exact command `medallion submit-cmd` prints.
#   infra/scheduling/run-job.sh <bronze|silver|gold|all|maintain> [medallion submit-cmd options...]
#   (`all --maintain`: every layer, then the maintenance that is due, in one job)
# MEDALLION_HOME: the checkout or install folder holding .venv (default: two levels up from here).
# Before it starts, the job takes a lock per layer it writes, per lakehouse (the lakehouse the
# options and environment resolve to, local or S3): a job that would write beside another one on
# this host (the previous run of its schedule, or a maintenance of the same lakehouse) skips
# instead; jobs of other layers or other lakehouses run. Across hosts, see docs/operations.md.
set -euo pipefail
job="${1:?usage: run-job.sh <bronze|silver|gold|all|maintain> [submit-cmd options]}"
shift
home="${MEDALLION_HOME:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$home"
spec="$("$home/.venv/bin/medallion" submit-cmd "$job" --format json "$@")"
# Three lines from the job's parts: the lakehouse's lock key, the layers it writes, the command.
mapfile -t parts < <(printf '%s' "$spec" | "$home/.venv/bin/python" -c '
import hashlib, json, sys
from medallion.redact import quote_command
job = json.load(sys.stdin)
print(hashlib.sha256(job["lakehouse"].encode()).hexdigest()[:12])
print(" ".join(job["layers"]))
print(quote_command([*(f"{key}={value}" for key, value in job["env"].items()), *job["argv"]]))')
key="${parts[0]}"
command="${parts[2]}"
for layer in ${parts[1]}; do  # in one order for every job: two jobs never wait on each other
    lock="${MEDALLION_LOCK_DIR:-/tmp}/medallion-${key}-${layer}.lock"
    exec {fd}>"$lock"
    if ! flock -n "$fd"; then
        echo "medallion ${job}: another job writes the ${layer} layer of this lakehouse (${lock}); skipped" >&2
        exit 0
    fi
done
# The log line goes through the project's one redaction function (medallion/redact.py): cron
# mails and log files must never hold a secret, whatever the command came to carry.
echo "medallion ${job}: $(printf '%s\n' "$command" | "$home/.venv/bin/python" -m medallion.redact)" >&2
eval "$command"
