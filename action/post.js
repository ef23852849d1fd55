// The Action's post step: it finds out whether the job failed, then
// action/post.sh exports the cluster's logs (when asked to for this
// outcome) and deletes the cluster.
//
// A post step is not told how the job went, so this asks GitHub's REST API
// for the jobs of this run attempt ("List jobs for a workflow run
// attempt") and takes the one that is in progress on this runner: it
// failed when one of its steps concluded failure or cancelled. Whatever
// stops the answer (no token, no actions: read permission, no network, no
// such job) leaves it unknown, and post.sh then exports the logs: logs
// nobody needed cost seconds, logs that were needed cannot be made once
// the cluster is gone.
'use strict';

const { runScript } = require('./run.js');

async function jobOutcome() {
  const e = process.env;
  const token = e['INPUT_GITHUB-TOKEN'];
  if (!token) {
    return { failed: 'unknown', why: 'no github-token to read the job status with' };
  }
  const api = e.GITHUB_API_URL || 'https://api.github.com';
  const base = `${api}/repos/${e.GITHUB_REPOSITORY}/actions/runs/${e.GITHUB_RUN_ID}/attempts/${e.GITHUB_RUN_ATTEMPT || '1'}/jobs`;
  try {
    // A run has at most 256 jobs: three pages of 100.
    for (let page = 1; page <= 3; page++) {
      const res = await fetch(`${base}?per_page=100&page=${page}`, {
        headers: {
          Accept: 'application/vnd.github+json',
          Authorization: `Bearer ${token}`,
          'X-GitHub-Api-Version': '2022-11-28',
        },
        signal: AbortSignal.timeout(15000),
      });
      if (!res.ok) {
        return { failed: 'unknown', why: `GitHub's API answered ${res.status} for the job status (the token needs actions: read)` };
      }
      const jobs = (await res.json()).jobs || [];
      const mine = jobs.find((j) => j.runner_name === e.RUNNER_NAME && j.status === 'in_progress');
      if (mine) {
        const bad = (mine.steps || []).filter((s) => s.conclusion === 'failure' || s.conclusion === 'cancelled');
        if (bad.length > 0) {
          return { failed: 'true', why: `step "${bad[0].name}" ${bad[0].conclusion === 'failure' ? 'failed' : 'was cancelled'}` };
        }
        return { failed: 'false', why: `every step of job "${mine.name}" succeeded` };
      }
      if (jobs.length < 100) {
        break;
      }
    }
    return { failed: 'unknown', why: `no job of run ${e.GITHUB_RUN_ID} is in progress on runner "${e.RUNNER_NAME}"` };
  } catch (err) {
    return { failed: 'unknown', why: `cannot read the job status from ${api}: ${err.message}` };
  }
}

async function main() {
  const when = process.env['INPUT_EXPORT-LOGS'] || 'on-failure';
  let outcome = { failed: 'unknown', why: `export-logs is ${when}` };
  // With no cluster recorded there is nothing to export: no need to ask.
  if (when === 'on-failure' && process.env.STATE_cluster) {
    outcome = await jobOutcome();
  }
  process.exitCode = runScript('post.sh', {
    HWK_JOB_FAILED: outcome.failed,
    HWK_JOB_OUTCOME: outcome.why,
  });
}

main();
