#!/usr/bin/env bash
# Run one medallion job through spark-submit, with the exact command `medallion submit-cmd` prints.
#   infra/scheduling/run-job.sh <bronze|silver|gold|all> [medallion submit-cmd options...]
# MEDALLION_HOME: the checkout or install folder holding .venv (default: two levels up from here).
# A lock per job and options makes an overlapping schedule skip a run instead of starting a
# second writer; the same job of another team (another --conf-dir, --lakehouse, --pipeline,
# MEDALLION_HOME or MEDALLION_LAKEHOUSE...) on the same host has a lock of its own.
set -euo pipefail
job="${1:?usage: run-job.sh <bronze|silver|gold|all> [submit-cmd options]}"
shift
home="${MEDALLION_HOME:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$home"
key="$(printf '%s\0' "$home" "${MEDALLION_ENV:-}" "${MEDALLION_LANDING:-}" "${MEDALLION_LAKEHOUSE:-}" \
    "$job" "$@" | sha256sum | cut -c1-12)"
lock="${MEDALLION_LOCK_DIR:-/tmp}/medallion-${job}-${key}.lock"
exec 9>"$lock"
if ! flock -n 9; then
    echo "medallion ${job}: the previous run with these options is still going (${lock}); skipped" >&2
    exit 0
fi
command="$("$home/.venv/bin/medallion" submit-cmd "$job" "$@")"
# The log line goes through the project's one redaction function (medallion/redact.py): cron
# mails and log files must never hold a secret, whatever the command came to carry.
echo "medallion ${job}: $(printf '%s\n' "$command" | "$home/.venv/bin/python" -m medallion.redact)" >&2
eval "$command"
