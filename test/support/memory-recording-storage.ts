import type { RecordingStorage } from '../../runtime/recording/recording-storage.ts';

/** A RecordingStorage in memory, for tests that read the recorder's objects back. */
export class MemoryRecordingStorage implements RecordingStorage {
  readonly objects = new Map<string, Buffer>();
  async write(key: string, data: Buffer): Promise<void> {
    this.objects.set(key, data);
  }
  async read(key: string): Promise<Buffer> {
    const data = this.objects.get(key);
    if (!data) throw new Error(`no ${key}`);
    return data;
  }
  async removePrefix(prefix: string): Promise<void> {
    for (const key of [...this.objects.keys()]) if (key.startsWith(prefix)) this.objects.delete(key);
  }
}
