/**
 * The React bindings without a browser: server rendering (react-dom/server) with a real
 * `ArclightClient`, which needs no WebRTC until it connects. Checks what a first render shows
 * (the hooks' server snapshots, the components' markup), that the provider shares a given client
 * and creates no connection by rendering, and the error for a hook used outside a provider.
 * Connecting, media and unmounting are covered in Chromium (test/react/react-bindings.browser.test.ts).
 */

import { createElement as h, type ReactNode } from 'react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { ArclightClient } from '../arclight-client.ts';
import {
  ArclightProvider,
  ArclightVideo,
  WebcamPublisher,
  useArclight,
  useArclightClient,
  useArclightStats,
  useArclightTrack,
  useModelMessages,
} from './index.ts';

function Probe({ onClient }: { onClient?: (client: ArclightClient) => void }): ReactNode {
  const { client, status, error } = useArclight();
  onClient?.(client);
  const messages = useModelMessages();
  const stats = useArclightStats();
  const track = useArclightTrack('main_video');
  return h('p', { id: 'probe' }, `${status}|${error?.code ?? ''}|${messages.length}|${stats === undefined}|${track === undefined}`);
}

describe('React bindings, server-rendered', () => {
  it('a provider with client options renders its hooks disconnected and empty, without connecting', () => {
    let seen: ArclightClient | undefined;
    const html = renderToString(
      h(
        ArclightProvider,
        { modelName: 'echo', local: true, localRuntimeUrl: 'http://127.0.0.1:1', autoConnect: true },
        h(Probe, { onClient: (c) => (seen = c) }),
      ),
    );
    expect(html).toContain('disconnected||0|true|true');
    expect(seen).toBeInstanceOf(ArclightClient);
    // Effects do not run on the server: nothing connected.
    expect(seen!.getStatus()).toBe('disconnected');
    expect(seen!.getSessionId()).toBeUndefined();
  });

  it('a provider given a client shares that client', () => {
    const client = new ArclightClient({ modelName: 'echo', local: true, localRuntimeUrl: 'http://127.0.0.1:1' });
    let seen: ArclightClient | undefined;
    function Reader(): ReactNode {
      seen = useArclightClient();
      return null;
    }
    renderToString(h(ArclightProvider, { client }, h(Reader)));
    expect(seen).toBe(client);
  });

  it('ArclightVideo renders its placeholder until the track arrives, else an autoplaying muted inline <video> with the given props', () => {
    const client = new ArclightClient({ modelName: 'echo', local: true });
    const withPlaceholder = renderToString(
      h(ArclightProvider, { client }, h(ArclightVideo, { track: 'main_video', placeholder: h('i', null, 'waiting') })),
    );
    expect(withPlaceholder).toBe('<i>waiting</i>');
    const plain = renderToString(
      h(ArclightProvider, { client }, h(ArclightVideo, { track: 'main_video', className: 'stage', width: 320 })),
    );
    expect(plain).toMatch(/^<video /);
    for (const attribute of ['autoPlay=""', 'playsInline=""', 'muted=""', 'data-track="main_video"', 'class="stage"', 'width="320"'])
      expect(plain).toContain(attribute);
  });

  it('WebcamPublisher renders nothing, or its preview <video> with preview', () => {
    const client = new ArclightClient({ modelName: 'echo', local: true });
    expect(renderToString(h(ArclightProvider, { client }, h(WebcamPublisher, { track: 'webcam' })))).toBe('');
    const preview = renderToString(h(ArclightProvider, { client }, h(WebcamPublisher, { track: 'webcam', preview: true, id: 'me' })));
    expect(preview).toContain('<video');
    expect(preview).toContain('id="me"');
  });

  it('a hook outside a provider says what is missing', () => {
    expect(() => renderToString(h(Probe))).toThrow('useArclight() needs an <ArclightProvider> above it in the tree.');
  });
});
