/**
 * `arclight/client/react` — React bindings for the client library: a provider that owns (or
 * shares) an `ArclightClient`, hooks for its status, messages, stats and tracks, a video view and
 * a webcam publisher. Needs `react` 19 (an optional peer dependency of `arclight`).
 *
 * @example
 * ```tsx
 * import { ArclightProvider, ArclightVideo, WebcamPublisher, useArclight, useModelMessages } from 'arclight/client/react';
 *
 * function Controls() {
 *   const { status, sendCommand } = useArclight();
 *   const [last] = useModelMessages({ type: 'input_started', limit: 1 });
 *   return <>
 *     <p>{status}{last ? ` — camera ${JSON.stringify(last.data)}` : ''}</p>
 *     <button disabled={status !== 'ready'} onClick={() => sendCommand('set_brightness', { value: 0.5 })}>Dim</button>
 *   </>;
 * }
 *
 * export const App = () => (
 *   <ArclightProvider modelName="echo" local localRuntimeUrl="http://localhost:8080" autoConnect>
 *     <ArclightVideo track="main_video" />
 *     <WebcamPublisher track="webcam" />
 *     <Controls />
 *   </ArclightProvider>
 * );
 * ```
 */
export {
  ArclightProvider,
  type ArclightProviderProps,
  type ArclightProviderOwnClientProps,
  type ArclightProviderClientProps,
} from './arclight-provider.tsx';
export { ArclightContext, useArclightClient, type ArclightContextValue } from './arclight-context.ts';
export { useArclight, useArclightStatus, type UseArclightResult } from './use-arclight.ts';
export { useModelMessages, useModelMessage, type ModelMessagesQuery, type MessageOfType } from './use-model-messages.ts';
export { typedHooks, type TypedArclightHooks } from './typed-hooks.ts';
export { useArclightStats } from './use-arclight-stats.ts';
export { useArclightTrack } from './use-arclight-track.ts';
export { ArclightVideo, type ArclightVideoProps } from './arclight-video.tsx';
export { useWebcamPublisher, type WebcamPublisherOptions, type WebcamPublisherState } from './use-webcam-publisher.ts';
export { WebcamPublisher, type WebcamPublisherProps } from './webcam-publisher.tsx';
export type { VideoElementProps } from './stream-video.tsx';
