/**
 * `arclight/runtime/gpu` — the media internals beneath a session, for models and tools that work
 * at that level: video encoding outside a session (benchmarks, a model that encodes its own
 * frames), NVENC directly — including `encodeCuda` for frames already in GPU memory — the native
 * addon's CUDA buffers (native/README.md), and the Python worker bridge's wire types
 * (docs/python-worker.md). Model authors who emit frames need none of it (`arclight/runtime`).
 */
export { VideoEncoder } from './media/video-encoder-factory.ts';
export type {
  VideoEncoderOptions,
  EncodedVideoFrame,
  VideoCodec,
  VideoEncoderStats,
  H264Profile,
  CheckedEncoderOptions,
} from './media/video-encoder.ts';
export { NvencVideoEncoder } from './media/nvenc-video-encoder.ts';
export type { EncoderBackend, EncoderImplementation } from './media/encoder-backends.ts';
export type {
  CudaFrame,
  CudaBuffer,
  CudaFrameShape,
  CudaFrameDownload,
  CudaDeviceInfo,
  NvencProbeResult,
  NvencEncoderOptions,
  NvencCodec,
  NvencInputFormat,
  NativeAddon,
  NvencEncoder,
  NvencPicture,
} from './native/native-addon.ts';
/** The native addon itself (undefined when not built): nvencProbe, CudaBuffer, … (native/README.md). */
export { nativeAddon } from './native/native-addon.ts';
export type { PythonWorkerGroup, PythonWorkerGroupOptions } from './python/worker-group.ts';
export type {
  ModelDescription as PythonModelDescription,
  DeclaredCommand as PythonDeclaredCommand,
  SlotFrame as PythonSlotFrame,
  SuccessfulReply as PythonWorkerReply,
  WorkerPixelFormat as PythonPixelFormat,
  WorkerMessage as PythonWorkerMessage,
  WorkerReply as PythonWorkerAnyReply,
  WorkerFailure as PythonWorkerFailure,
  WorkerRequest as PythonWorkerRequest,
} from './python/worker-protocol.ts';
export type { FrameRing } from './python/frame-ring.ts';
