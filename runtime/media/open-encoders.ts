/**
 * How many video encoders this process holds open, for leak checks: a restarted encoder must be
 * freed, not merely dropped, or a long session that keeps losing its encoder grows without bound.
 * Every `VideoEncoder` implementation counts itself in on open and out when it frees its resources
 * — which is also when the process's allocator is asked to give the freed memory back.
 */

import { processAllocatorTrimmer } from '../native/allocator.ts';

let open = 0;

export function noteVideoEncoderOpened(): void {
  open++;
}

export function noteVideoEncoderFreed(): void {
  open--;
  processAllocatorTrimmer.schedule();
}

/** Video encoders opened and not yet freed (the runtime's black-frame and probe encoders included). */
export function openVideoEncoderCount(): number {
  return open;
}
