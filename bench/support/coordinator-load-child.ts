/**
 * One load process of `LoadProcesses` (bench/support/coordinator-load.ts): tells its parent it is
 * ready, then for each `LoadJob` it receives sends the request closed-loop — warm-up until the
 * job's `startAt`, recorded until its `endAt` — and answers with the latencies and errors.
 */

import { loopUntil, requester, type LoadAnswer, type LoadJob } from './coordinator-load.ts';

/** performance.now() at an epoch time (both clocks of this machine). */
const local = (epochMs: number) => performance.now() + (epochMs - Date.now());

process.on('message', (job: LoadJob) => {
  void (async () => {
    const request = requester(job.spec, job.offset);
    await loopUntil(request, job.concurrency, local(job.startAt), false, job.expectStatus);
    const { latencies, errors } = await loopUntil(request, job.concurrency, local(job.endAt), true, job.expectStatus);
    const answer: LoadAnswer = { latencies: Float64Array.from(latencies), errors };
    process.send!(answer);
  })();
});
// The parent's channel closing (it exited or was killed) ends this process too.
process.once('disconnect', () => process.exit(0));
process.send!('ready');
