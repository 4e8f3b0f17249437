import { describe, expect, it } from 'vitest';
import { BoundedQueue } from './bounded-queue.ts';

describe('BoundedQueue', () => {
  it('makes push wait for room, in order', async () => {
    const queue = new BoundedQueue<number>(1);
    await queue.push(1);
    let second = false;
    const pending = queue.push(2).then(() => (second = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(second).toBe(false);
    expect(await queue.shift()).toBe(1);
    await pending;
    expect(second).toBe(true);
    expect(await queue.shift()).toBe(2);
  });

  it('drops the oldest or the newest without waiting', () => {
    const queue = new BoundedQueue<number>(2);
    expect(queue.pushDropping(1, 'oldest')).toBeUndefined();
    expect(queue.pushDropping(2, 'oldest')).toBeUndefined();
    expect(queue.pushDropping(3, 'oldest')).toBe(1);
    expect(queue.pushDropping(4, 'newest')).toBe(4);
    expect(queue.clear()).toEqual([2, 3]);
  });

  it('keeps only the newest item on request and releases waiting pushers', async () => {
    const queue = new BoundedQueue<number>(2);
    await queue.push(1);
    await queue.push(2);
    const third = queue.push(3);
    expect(queue.keepNewest()).toEqual([1]);
    await third;
    expect(queue.clear()).toEqual([2, 3]);
  });

  it('releases everyone on close', async () => {
    const queue = new BoundedQueue<number>(1);
    await queue.push(1);
    const blocked = queue.push(2);
    const reader = new BoundedQueue<number>(1).shift();
    queue.close();
    await blocked;
    expect(await queue.shift()).toBeUndefined();
    expect(reader).toBeInstanceOf(Promise);
  });
});
