#!/usr/bin/env bash
# The Action's post step, started by action/post.js (which says in
# HWK_JOB_FAILED whether the job failed: true, false or unknown): exports
# the cluster's logs when export-logs asks for it, then deletes the
# cluster, whatever happened before. The main step recorded the cluster
# and the hwk binary (STATE_cluster, STATE_hwk) before it made anything.
set -uo pipefail

name=${STATE_cluster:-}
hwk=${STATE_hwk:-}
if [ -z "$name" ] || [ -z "$hwk" ]; then
	echo "hwk: the main step made nothing to clean up"
	exit 0
fi

export_logs=false
case ${HWK_INPUT_EXPORT_LOGS:-on-failure} in
always) export_logs=true ;;
never) ;;
*)
	case ${HWK_JOB_FAILED:-unknown} in
	true)
		export_logs=true
		echo "hwk: the job failed (${HWK_JOB_OUTCOME:-}); exporting the cluster's logs"
		;;
	false) echo "hwk: ${HWK_JOB_OUTCOME:-the job succeeded}; no logs exported" ;;
	*)
		export_logs=true
		echo "hwk: exporting the cluster's logs, since the job's outcome is unknown: ${HWK_JOB_OUTCOME:-}"
		;;
	esac
	;;
esac

status=0
if [ "$export_logs" = true ]; then
	dir=${HWK_INPUT_LOGS_DIR:-${RUNNER_TEMP:-/tmp}/hwk-logs}
	mkdir -p "$dir"
	echo "::group::hwk export logs $dir --name $name"
	if archive=$("$hwk" export logs "$dir" --name "$name"); then
		echo "::endgroup::"
		echo "hwk: logs of cluster $name in $archive"
		base=$(basename "$archive" .tar.gz)
		echo "::group::$base/summary.txt"
		tar -xzOf "$archive" "$base/summary.txt" || true
		echo "::endgroup::"
	else
		echo "::endgroup::"
		echo "::warning title=hwk::hwk export logs failed; the cluster is deleted all the same"
	fi
fi

echo "::group::hwk down --name $name"
if ! "$hwk" down --name "$name"; then
	echo "::error title=hwk::hwk down --name $name failed; on a self-hosted runner remove what is left with the same command"
	status=1
fi
echo "::endgroup::"
exit $status
