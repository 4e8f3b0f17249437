/**
 * A small app on the React bindings (`arclight/client/react`) against the `echo` model, for
 * test/react/react-bindings.browser.test.ts: the provider (autoConnect, under StrictMode), the
 * status/error, message, stats and track hooks, the video view, the webcam publisher with a
 * preview, a command button with its reply, disconnect/connect buttons, and a button that
 * unmounts the whole tree.
 * The hooks are typed by the model (`typedHooks`). `?runtime=<url>` says where the runtime is.
 */

import { StrictMode, useState, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import type { ArclightError } from 'arclight/client';
import { ArclightProvider, ArclightVideo, WebcamPublisher, typedHooks, useArclightStats } from 'arclight/client/react';
import type { ModelTypesOf } from 'arclight/runtime';
import type echo from '../../models/examples/echo/index.ts';

// The echo model's command and message types (type-only: the page bundles no runtime code).
const { useArclight, useModelMessage, useModelMessages } = typedHooks<ModelTypesOf<typeof echo>>();

const runtimeUrl = new URLSearchParams(location.search).get('runtime') ?? location.origin;

function Status(): ReactNode {
  const { status, error } = useArclight();
  return (
    <p>
      <span id="status" data-status={status}>
        {status}
      </span>{' '}
      <span id="error">{error ? `${error.code}: ${error.message}` : ''}</span>
    </p>
  );
}

/** Disconnect (ending the session) and connect again (a new one): the publisher must publish again. */
function ConnectionButtons(): ReactNode {
  const { status, connect, disconnect } = useArclight();
  return (
    <p>
      <button id="disconnect" disabled={status !== 'ready'} onClick={() => void disconnect()}>
        Disconnect
      </button>{' '}
      <button id="connect" disabled={status !== 'disconnected'} onClick={() => connect().catch(() => {})}>
        Connect
      </button>
    </p>
  );
}

function DimButton(): ReactNode {
  const { status, sendCommand } = useArclight();
  const [reply, setReply] = useState('');
  const dim = (): void => {
    sendCommand('set_brightness', { value: 0.5 }).then(
      (answer) => setReply(JSON.stringify(answer ?? null)),
      (error: ArclightError) => setReply(`failed: ${error.code}`),
    );
  };
  return (
    <p>
      <button id="dim" disabled={status !== 'ready'} onClick={dim}>
        Dim
      </button>{' '}
      <output id="reply">{reply}</output>
    </p>
  );
}

function MessageList(): ReactNode {
  const messages = useModelMessages({ limit: 20 });
  return (
    <ul id="messages">
      {messages.map((message, i) => (
        <li key={i} data-type={message.type}>{`${message.type} ${JSON.stringify(message.data ?? null)}`}</li>
      ))}
    </ul>
  );
}

function InputSize(): ReactNode {
  const [latest] = useModelMessages({ type: 'input_started', limit: 1 });
  const [heard, setHeard] = useState(0);
  useModelMessage('input_started', () => setHeard((n) => n + 1));
  return (
    <p id="input-size" data-heard={heard}>
      {latest ? JSON.stringify(latest.data) : 'no input yet'}
    </p>
  );
}

function StatsLine(): ReactNode {
  const stats = useArclightStats(500);
  return (
    <p id="stats" data-frames={stats?.framesDecoded ?? 0} data-timestamp={stats?.timestamp ?? 0}>
      {stats ? `${stats.framesPerSecond ?? 0} fps, ${stats.framesDecoded ?? 0} frames` : 'no stats yet'}
    </p>
  );
}

function App(): ReactNode {
  const [mounted, setMounted] = useState(true);
  return (
    <>
      <button id="unmount" onClick={() => setMounted(false)}>
        Unmount
      </button>
      {mounted && (
        <ArclightProvider modelName="echo" local localRuntimeUrl={runtimeUrl} autoConnect>
          <Status />
          <ConnectionButtons />
          <ArclightVideo id="output" track="main_video" width={320} placeholder={<p id="waiting">Waiting for video…</p>} />
          <WebcamPublisher id="preview" track="webcam" constraints={{ width: 320, height: 240 }} preview width={160} />
          <DimButton />
          <InputSize />
          <StatsLine />
          <MessageList />
        </ArclightProvider>
      )}
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
