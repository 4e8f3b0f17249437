/**
 * Arclight playground. Plain browser ES module, no build step.
 *
 * Connects straight to the runtime that serves it (local mode), or — when the runtime was
 * started with `playgroundHosted` (`arclight stack`) — also through the coordinator (hosted
 * mode): the page asks its runtime for a session-scoped token (POST /playground/token; the API
 * key stays on the server) and connects the client library to the coordinator with it.
 *
 * Reads the model's interface from GET /schema (OpenAPI 3.1 with an `x-arclight` extension),
 * renders one player per output track, a publish toggle per input track and a form per command
 * (generated from the command's JSON schema), and drives the model through the client library.
 *
 * Stable hooks for tests and tooling:
 *   #connect, #disconnect, #status[data-status], #status-detail, #mode (local | hosted; shown
 *   only when the runtime offers hosted mode)
 *   video[data-track=NAME], audio[data-track=NAME], [data-pause=NAME], [data-unmute=NAME]
 *   [data-publish=NAME], video[data-preview=NAME]
 *   form[data-command=NAME] (inputs named after the params), [data-error-for=PARAM], [data-result]
 *   #log (li[data-kind][data-type]), #stats [data-stat=fps|rtt|bitrate|framesDecoded|framesDropped|packetLoss|latency|playout]
 *   (playout: one .playout-line[data-track][data-mode][data-fps][data-production-fps] per output video track)
 *   #clip, #download, #clip-info[data-duration] (with a#clip-link to the playlist),
 *   #clip-progress[data-state=pending|done|error][data-bytes] (data-bytes: the saved file's size)
 *   #model-load (#model-load-progress: the model's load() progress), #load-error (#load-error-where:
 *   file:line:column, #load-error-detail), #reload-notice[data-version] (shown after each reload)
 *
 * Under `arclight dev` the model changes while the page is open: on each new version (the
 * `model_reloaded` runtime event or message) the page re-reads /schema, re-renders the command
 * forms keeping every value whose command and field still exist, and — when the reload ended the
 * session (its tracks changed) — connects again by itself.
 *
 * Longer than ~400 lines: a page script served as is (no build step), in sections — connection,
 * players, track publishing, command forms, clips, session log, stats. Splitting it into modules
 * is possible (the browser loads ES modules) and worth doing when it next grows.
 */

import { ArclightClient, ArclightError, DEFAULT_CLIP_FILENAME, cacheToken } from '/playground/arclight-client.js';

const LOG_LIMIT = 200;
/** Session log lines kept on the page (the runtime keeps 10,000; getSessionLogs pages through them). */
const SESSION_LOG_LIMIT = 500;
/** Runtime messages that are pure plumbing: not worth a log line. */
const QUIET_RUNTIME_MESSAGES = new Set(['pong', 'command_ack', 'media_stats']);
const CLIP_SECONDS = 10;

const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

/** Tiny DOM builder: el('div', { class: 'x', 'data-a': 1, onclick: fn }, child, 'text'). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (value === true) node.setAttribute(key, '');
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const cssEscape = (value) => (globalThis.CSS?.escape ? CSS.escape(value) : String(value).replace(/["\\]/g, '\\$&'));
const byData = (attr, name, root = document) => root.querySelector(`[data-${attr}="${cssEscape(name)}"]`);

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------

const app = {
  /** The OpenAPI document from /schema. */
  schema: undefined,
  modelName: undefined,
  tracks: [],
  /** @type {ArclightClient | undefined} */
  client: undefined,
  status: 'disconnected',
  /** Input track name → the local MediaStream being published. */
  published: new Map(),
  /** Output track names paused by the user. */
  paused: new Set(),
  /** The last error already written to the log (the client emits `error` and also rejects). */
  lastLoggedError: undefined,
  /** From GET /playground/config: `{coordinator_url}` when hosted mode is on offer, else null. */
  hosted: null,
  /** The mode of the current (or next) connection: 'local' or 'hosted'. */
  mode: 'local',
  /** The mode `client` was created in. */
  clientMode: 'local',
  /** Hosted mode: the token the current client uses (to end its session when the page goes away). */
  token: undefined,
  /** The last clip made (`{clipId, playlistUrl, durationSeconds, expiresAt}`): what Download saves. */
  clip: undefined,
  /** A clip request or download is under way: both clip buttons wait for it. */
  clipBusy: false,
};

// ---------------------------------------------------------------------------
// Log
// ---------------------------------------------------------------------------

function timestamp() {
  const now = new Date();
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(now.getHours())}:${pad(now.getMinutes())}:${pad(now.getSeconds())}.${pad(now.getMilliseconds(), 3)}`;
}

function compactJson(value) {
  if (value === undefined) return '';
  try {
    const text = JSON.stringify(value);
    return text.length > 600 ? `${text.slice(0, 600)}…` : text;
  } catch {
    return String(value);
  }
}

/**
 * Adds a line to the log (newest first, capped at LOG_LIMIT).
 * kind: status | message | runtime | command | error | info
 */
function log(kind, text, { type, data } = {}) {
  const list = $('#log');
  const item = el(
    'li',
    { class: `log-entry log-${kind}`, 'data-kind': kind, 'data-type': type },
    el('time', { text: timestamp() }),
    el('span', { class: 'log-kind', text: kind }),
    el('span', { class: 'log-text' }, type ? el('strong', { text: type }) : null, text ? ` ${text}` : null),
    data === undefined ? null : el('code', { class: 'log-data', text: compactJson(data) }),
  );
  list.prepend(item);
  while (list.children.length > LOG_LIMIT) list.lastElementChild.remove();
}

/** A line of the session's log (the client's `log` event): newest first, capped at SESSION_LOG_LIMIT. */
function sessionLogLine(line) {
  const list = $('#session-log');
  const time = new Date(line.time);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  const item = el(
    'li',
    {
      class: `log-entry slog-${line.source} slog-${line.level}`,
      'data-source': line.source,
      'data-level': line.level,
      'data-seq': String(line.seq),
    },
    el('time', { text: `${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}.${pad(time.getMilliseconds(), 3)}` }),
    el('span', { class: 'log-kind', text: line.source }),
    el('span', { class: 'log-text', text: line.level === 'info' ? line.message : `${line.level}: ${line.message}` }),
    line.fields === undefined ? null : el('code', { class: 'log-data', text: compactJson(line.fields) }),
  );
  list.prepend(item);
  while (list.children.length > SESSION_LOG_LIMIT) list.lastElementChild.remove();
}

function logError(error, context) {
  if (error && error === app.lastLoggedError) return;
  app.lastLoggedError = error;
  const { code, message, field } = describeError(error);
  log('error', `${context ? `${context}: ` : ''}${message}${field ? ` (field ${field})` : ''}`, { type: code });
}

function describeError(error) {
  if (error && typeof error === 'object') {
    return {
      code: typeof error.code === 'string' ? error.code : error.name || 'error',
      message: error.message || String(error),
      field: typeof error.field === 'string' ? error.field : undefined,
    };
  }
  return { code: 'error', message: String(error), field: undefined };
}

// ---------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------

function setStatus(status) {
  app.status = status;
  const badge = $('#status');
  badge.textContent = status;
  badge.dataset.status = status;
  document.body.dataset.status = status;
  const ready = status === 'ready';
  $('#connect').disabled = status !== 'disconnected' || !app.modelName;
  $('#disconnect').disabled = status === 'disconnected';
  for (const button of $$('[data-pause], [data-publish]')) button.disabled = !ready;
  $('#latency-mode').disabled = !ready;
  $('#mode').disabled = status !== 'disconnected';
  if (ready) $('#latency-mode').value = app.client?.getSessionInfo()?.latency_mode ?? 'smooth';
  for (const button of $$('form[data-command] button[type="submit"]')) {
    button.disabled = !ready;
    button.title = ready ? '' : 'Connect first';
  }
  updateClipButtons();
  if (ready) setProblem(undefined);
}

/** Shows (or hides, with undefined) the error banner under the header. */
function setProblem(text) {
  const banner = $('#status-detail');
  banner.textContent = text ?? '';
  banner.hidden = !text;
  $('#status').classList.toggle('has-error', Boolean(text));
}

// ---------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------

/** Follows local `$ref`s (`#/components/...`) in the OpenAPI document. */
function deref(node) {
  const seen = new Set();
  while (node && typeof node === 'object' && typeof node.$ref === 'string' && node.$ref.startsWith('#/') && !seen.has(node.$ref)) {
    seen.add(node.$ref);
    node = node.$ref
      .slice(2)
      .split('/')
      .map((part) => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((at, key) => (at && typeof at === 'object' ? at[key] : undefined), app.schema);
  }
  return node;
}

/** The JSON schema of a command's params (x-arclight.commands.NAME.requestBody → components.requestBodies). */
function commandSchema(command) {
  const body = deref(command?.requestBody);
  const schema = deref(body?.content?.['application/json']?.schema);
  return schema && typeof schema === 'object' ? schema : { type: 'object' };
}

function kindOf(schema) {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return 'enum';
  if ('const' in schema) return 'const';
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? type[0];
  if (type === undefined) {
    if ('minimum' in schema || 'maximum' in schema) type = 'number';
    else if ('pattern' in schema || 'maxLength' in schema || 'minLength' in schema) type = 'string';
  }
  return ['number', 'integer', 'string', 'boolean'].includes(type) ? type : 'json';
}

function compilePattern(pattern) {
  if (typeof pattern !== 'string') return undefined;
  try {
    return new RegExp(pattern, 'u');
  } catch {
    try {
      return new RegExp(pattern);
    } catch {
      return undefined;
    }
  }
}

/** A string param that holds a `#rrggbb` colour gets a colour picker next to its text box. */
function isColourPattern(schema) {
  if (schema.format === 'color') return true;
  const re = compilePattern(schema.pattern);
  return Boolean(re && re.test('#1a2b3c') && re.test('#A0B0C0') && !re.test('') && !re.test('hello') && !re.test('#12'));
}

// ---------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------

function renderHeader() {
  const x = app.schema['x-arclight'] ?? {};
  const model = x.model ?? {};
  app.modelName = model.name;
  $('#model-name').textContent = model.name ?? '(unnamed model)';
  document.title = `${model.name ?? 'Model'} · Arclight playground`;
  const version = $('#model-version');
  version.textContent = model.version ? `v${model.version}` : '';
  version.hidden = !model.version;
  const fps = $('#model-fps');
  fps.textContent = typeof x.fps === 'number' ? `${x.fps} fps` : '';
  fps.hidden = typeof x.fps !== 'number';
  // info.description is the model's description followed by a paragraph about the protocol.
  const first = String(app.schema.info?.description ?? '')
    .split('\n\n')[0]
    ?.trim();
  const description = $('#model-description');
  if (first && !first.startsWith('Commands travel on the WebRTC data channel')) {
    description.textContent = first;
    description.hidden = false;
  }
  $('#server-version').textContent = x.server_version ? `Arclight runtime ${x.server_version}` : 'Arclight runtime';
}

// ---------------------------------------------------------------------------
// Tracks
// ---------------------------------------------------------------------------

function renderTracks() {
  const outputs = app.tracks.filter((t) => t.direction === 'recvonly');
  const inputs = app.tracks.filter((t) => t.direction === 'sendonly');
  const outBox = $('#outputs');
  outBox.replaceChildren(
    ...(outputs.length ? outputs.map(outputCard) : [el('p', { class: 'empty', text: 'This model has no output tracks.' })]),
  );
  const inBox = $('#inputs');
  inBox.replaceChildren(...inputs.map(inputCard));
  $('#inputs-panel').hidden = inputs.length === 0;
}

function outputCard(track) {
  const size = track.width && track.height ? `${track.width}×${track.height}` : '';
  const pause = el('button', {
    type: 'button',
    class: 'btn small',
    'data-pause': track.name,
    'aria-pressed': 'false',
    disabled: true,
    text: 'Pause',
    onclick: () => togglePause(track.name),
  });
  let media;
  let controls;
  if (track.kind === 'video') {
    media = el('video', { 'data-track': track.name, autoplay: true, muted: true, playsinline: true });
    media.muted = true; // the attribute alone does not set the property in every browser
    if (track.width && track.height) media.style.aspectRatio = `${track.width} / ${track.height}`;
    media.addEventListener('resize', () => {
      const meta = byData('meta-for', track.name);
      if (meta && media.videoWidth) meta.textContent = `${media.videoWidth}×${media.videoHeight}`;
    });
    controls = [pause];
  } else {
    media = el('audio', { 'data-track': track.name, autoplay: true, muted: true });
    media.muted = true;
    const unmute = el('button', {
      type: 'button',
      class: 'btn small',
      'data-unmute': track.name,
      'aria-pressed': 'false',
      text: 'Unmute',
      onclick: () => toggleMute(track.name),
    });
    const volume = el('input', {
      type: 'range',
      min: 0,
      max: 1,
      step: 0.05,
      value: 1,
      'aria-label': `${track.name} volume`,
      'data-volume': track.name,
      oninput: (event) => (media.volume = Number(event.target.value)),
    });
    controls = [unmute, volume, pause];
  }
  const stage =
    track.kind === 'video'
      ? el('div', { class: 'stage' }, media, el('div', { class: 'stage-overlay', 'data-overlay': track.name, text: 'Not connected' }))
      : el(
          'div',
          { class: 'audio-stage' },
          el('span', { class: 'audio-icon', 'aria-hidden': 'true', text: '\u266A' }),
          el('span', { class: 'audio-state', 'data-audio-state': track.name, text: 'Not connected' }),
          media,
        );
  return el(
    'article',
    { class: `track-card track-${track.kind}`, 'data-output': track.name },
    el(
      'header',
      { class: 'track-head' },
      el('span', { class: `kind kind-${track.kind}`, text: track.kind }),
      el('h3', { text: track.name }),
      el('span', {
        class: 'track-meta',
        'data-meta-for': track.name,
        text:
          track.kind === 'video'
            ? size
            : [track.sample_rate ? `${track.sample_rate / 1000} kHz` : '', track.channels ? `${track.channels} ch` : '']
                .filter(Boolean)
                .join(' · '),
      }),
      el('span', { class: 'spacer' }),
      ...controls,
    ),
    stage,
  );
}

function inputCard(track) {
  const label = track.kind === 'video' ? 'Publish webcam' : 'Publish microphone';
  const preview =
    track.kind === 'video'
      ? el('video', { class: 'preview', 'data-preview': track.name, autoplay: true, muted: true, playsinline: true })
      : el('span', { class: 'audio-icon', 'aria-hidden': 'true', text: '\u266A' });
  if (preview.tagName === 'VIDEO') preview.muted = true;
  return el(
    'article',
    { class: 'input-card', 'data-input': track.name },
    el('div', { class: 'preview-box' }, preview, el('span', { class: 'preview-off', text: 'off' })),
    el(
      'div',
      { class: 'input-body' },
      el(
        'header',
        { class: 'track-head' },
        el('span', { class: `kind kind-${track.kind}`, text: track.kind }),
        el('h3', { text: track.name }),
      ),
      el('button', {
        type: 'button',
        class: 'btn small',
        'data-publish': track.name,
        'data-label': label,
        'aria-pressed': 'false',
        disabled: true,
        text: label,
        onclick: () => togglePublish(track),
      }),
      el('div', { class: 'input-error', 'data-input-error': track.name, role: 'alert' }),
    ),
  );
}

function attachTrack(name, track) {
  const media = byData('track', name);
  if (!media) {
    log('info', `received track "${name}", which the schema does not list`);
    return;
  }
  media.srcObject = new MediaStream([track]);
  media.play().catch(() => {
    // autoplay of muted media is allowed; an unmuted audio element waits for the Unmute click
  });
  const overlay = byData('overlay', name);
  if (overlay) {
    overlay.textContent = 'Waiting for frames…';
    overlay.hidden = false;
    const hide = () => (overlay.hidden = true);
    media.addEventListener('playing', hide, { once: true });
    if (media.readyState >= 2) hide();
  }
  const audioState = byData('audio-state', name);
  if (audioState) audioState.textContent = media.muted ? 'Receiving (muted)' : 'Playing';
  track.addEventListener('ended', () => {
    if (overlay) {
      overlay.textContent = 'Track ended';
      overlay.hidden = false;
    }
  });
  log('info', `${track.kind} track received`, { type: name });
}

function detachTracks() {
  for (const media of $$('[data-track]')) {
    media.srcObject = null;
  }
  for (const overlay of $$('[data-overlay]')) {
    overlay.textContent = 'Not connected';
    overlay.hidden = false;
  }
  for (const state of $$('[data-audio-state]')) state.textContent = 'Not connected';
  for (const button of $$('[data-pause]')) {
    button.textContent = 'Pause';
    button.setAttribute('aria-pressed', 'false');
  }
  app.paused.clear();
}

function togglePause(name) {
  const client = app.client;
  if (!client) return;
  const button = byData('pause', name);
  const pausing = !app.paused.has(name);
  try {
    if (pausing) client.pauseTrack(name);
    else client.resumeTrack(name);
  } catch (error) {
    logError(error, `${pausing ? 'pause' : 'resume'} ${name}`);
    return;
  }
  if (pausing) app.paused.add(name);
  else app.paused.delete(name);
  button.textContent = pausing ? 'Resume' : 'Pause';
  button.setAttribute('aria-pressed', String(pausing));
  const overlay = byData('overlay', name);
  if (overlay) {
    overlay.textContent = pausing ? 'Paused' : '';
    overlay.hidden = !pausing;
  }
  const audioState = byData('audio-state', name);
  if (audioState) audioState.textContent = pausing ? 'Paused' : 'Receiving';
  log('info', pausing ? 'paused' : 'resumed', { type: name });
}

function toggleMute(name) {
  const media = byData('track', name);
  const button = byData('unmute', name);
  media.muted = !media.muted;
  if (!media.muted) media.play().catch((error) => logError(error, `play ${name}`));
  button.textContent = media.muted ? 'Unmute' : 'Mute';
  button.setAttribute('aria-pressed', String(!media.muted));
  const audioState = byData('audio-state', name);
  if (audioState && media.srcObject) audioState.textContent = media.muted ? 'Receiving (muted)' : 'Playing';
}

async function togglePublish(track) {
  const client = app.client;
  const button = byData('publish', track.name);
  const errorBox = byData('input-error', track.name);
  const card = byData('input', track.name);
  if (!client || button.dataset.busy) return;
  button.dataset.busy = 'true';
  button.disabled = true;
  errorBox.textContent = '';
  try {
    if (app.published.has(track.name)) {
      await client.unpublishTrack(track.name);
      stopLocal(track.name);
      log('info', 'stopped publishing', { type: track.name });
    } else {
      const constraints =
        track.kind === 'video'
          ? { video: { width: { ideal: track.width ?? 640 }, height: { ideal: track.height ?? 480 } }, audio: false }
          : { audio: true, video: false };
      const stream = await navigator.mediaDevices.getUserMedia(constraints);
      const local = stream.getTracks()[0];
      try {
        await client.publishTrack(track.name, local);
      } catch (error) {
        for (const t of stream.getTracks()) t.stop();
        throw error;
      }
      app.published.set(track.name, stream);
      local.addEventListener('ended', () => {
        if (app.published.get(track.name) !== stream) return;
        log('info', 'the local device stopped', { type: track.name });
        app.client?.unpublishTrack(track.name).catch((error) => logError(error, `unpublish ${track.name}`));
        stopLocal(track.name);
      });
      const preview = byData('preview', track.name);
      if (preview) {
        preview.srcObject = stream;
        preview.play().catch(() => {});
      }
      card.classList.add('live');
      button.textContent = 'Stop publishing';
      button.setAttribute('aria-pressed', 'true');
      const settings = local.getSettings?.() ?? {};
      log('info', `publishing ${local.label || local.kind}${settings.width ? ` ${settings.width}×${settings.height}` : ''}`, {
        type: track.name,
      });
    }
  } catch (error) {
    const { code, message } = describeError(error);
    errorBox.textContent = `${code}: ${message}`;
    logError(error, `publish ${track.name}`);
  } finally {
    delete button.dataset.busy;
    button.disabled = app.status !== 'ready';
  }
}

function stopLocal(name) {
  const stream = app.published.get(name);
  app.published.delete(name);
  for (const t of stream?.getTracks() ?? []) t.stop();
  const preview = byData('preview', name);
  if (preview) preview.srcObject = null;
  byData('input', name)?.classList.remove('live');
  const button = byData('publish', name);
  if (button) {
    button.textContent = button.dataset.label;
    button.setAttribute('aria-pressed', 'false');
  }
}

function stopAllLocal() {
  for (const name of [...app.published.keys()]) stopLocal(name);
}

// ---------------------------------------------------------------------------
// Command forms
// ---------------------------------------------------------------------------

function renderCommands() {
  const commands = Object.entries(app.schema['x-arclight']?.commands ?? {});
  const box = $('#commands');
  if (commands.length === 0) {
    box.replaceChildren(el('p', { class: 'empty', text: 'This model declares no commands.' }));
    return;
  }
  box.replaceChildren(...commands.map(([name, command]) => commandForm(name, command)));
}

function rangeText(schema) {
  const low =
    schema.exclusiveMinimum !== undefined
      ? `> ${schema.exclusiveMinimum}`
      : schema.minimum !== undefined
        ? String(schema.minimum)
        : undefined;
  const high =
    schema.exclusiveMaximum !== undefined
      ? `< ${schema.exclusiveMaximum}`
      : schema.maximum !== undefined
        ? String(schema.maximum)
        : undefined;
  if (low !== undefined && high !== undefined && !low.startsWith('>') && !high.startsWith('<')) return `${low} – ${high}`;
  return [low && (low.startsWith('>') ? low : `≥ ${low}`), high && (high.startsWith('<') ? high : `≤ ${high}`)].filter(Boolean).join(', ');
}

function commandForm(name, command) {
  const schema = commandSchema(command);
  const properties = deref(schema.properties) ?? {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(properties).map(([param, raw]) => paramField(name, param, deref(raw) ?? {}, required.has(param)));
  const replyType = command.reply_type;
  const result = el('output', { class: 'result', 'data-result': name, 'aria-live': 'polite' });
  const form = el(
    'form',
    { class: 'command', 'data-command': name, novalidate: true, autocomplete: 'off' },
    el(
      'div',
      { class: 'command-head' },
      el('h3', {}, el('code', { text: name })),
      replyType ? el('span', { class: 'reply-type', title: 'Reply message type', text: `→ ${replyType}` }) : null,
    ),
    command.description ? el('p', { class: 'command-desc', text: command.description }) : null,
    fields.length
      ? el(
          'div',
          { class: 'fields' },
          fields.map((f) => f.node),
        )
      : el('p', { class: 'no-params', text: 'No parameters.' }),
    el(
      'div',
      { class: 'command-foot' },
      el('button', { type: 'submit', class: 'btn primary small', disabled: app.status !== 'ready', text: 'Send' }),
      result,
    ),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void submitCommand(form, name, fields, result);
  });
  return form;
}

/** One parameter's control. Returns { node, read() → { value?, error? }, name, input }. */
function paramField(command, param, schema, required) {
  const id = `cmd-${command}-${param}`.replace(/[^A-Za-z0-9_-]/g, '_');
  const kind = kindOf(schema);
  const help = [];
  let input;
  let extra = null;
  let read;

  if (kind === 'boolean') {
    input = el('input', { type: 'checkbox', id, name: param });
    input.checked = schema.default === true;
    read = () => ({ value: input.checked });
  } else if (kind === 'enum' || kind === 'const') {
    const options = kind === 'enum' ? schema.enum : [schema.const];
    input = el('select', { id, name: param });
    if (!required && schema.default === undefined) input.append(el('option', { value: '', text: '—' }));
    options.forEach((option, index) =>
      input.append(el('option', { value: String(index), text: typeof option === 'string' ? option : JSON.stringify(option) })),
    );
    const defaultIndex = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(schema.default));
    if (defaultIndex >= 0) input.value = String(defaultIndex);
    read = () => (input.value === '' ? {} : { value: options[Number(input.value)] });
  } else if (kind === 'number' || kind === 'integer') {
    const step = schema.multipleOf ?? (kind === 'integer' ? 1 : 'any');
    input = el('input', {
      type: 'number',
      id,
      name: param,
      inputmode: kind === 'integer' ? 'numeric' : 'decimal',
      min: schema.minimum,
      max: schema.maximum,
      step,
    });
    if (typeof schema.default === 'number') input.value = String(schema.default);
    const range = rangeText(schema);
    if (range) help.push(el('span', { class: 'range', 'data-range-for': param, text: range }));
    if (kind === 'integer') help.push('integer');
    if (schema.multipleOf !== undefined) help.push(`step ${schema.multipleOf}`);
    if (typeof schema.minimum === 'number' && typeof schema.maximum === 'number') {
      const slider = el('input', {
        type: 'range',
        min: schema.minimum,
        max: schema.maximum,
        step,
        tabindex: '-1',
        'aria-hidden': 'true',
        class: 'slider',
      });
      slider.value = input.value === '' ? String(schema.minimum) : input.value;
      slider.addEventListener('input', () => {
        input.value = slider.value;
        clearFieldError(input);
      });
      input.addEventListener('input', () => {
        const n = Number(input.value);
        if (input.value !== '' && Number.isFinite(n)) slider.value = String(n);
      });
      extra = slider;
    }
    read = () => {
      if (input.validity.badInput) return { error: `${param} must be a number` };
      const text = input.value.trim();
      if (text === '') return required ? { error: `${param} is required` } : {};
      const value = Number(text);
      if (!Number.isFinite(value)) return { error: `${param} must be a number` };
      if (kind === 'integer' && !Number.isInteger(value)) return { error: `${param} must be a whole number` };
      if (typeof schema.minimum === 'number' && value < schema.minimum)
        return { error: `${param} must be at least ${schema.minimum} (got ${value})` };
      if (typeof schema.maximum === 'number' && value > schema.maximum)
        return { error: `${param} must be at most ${schema.maximum} (got ${value})` };
      if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum)
        return { error: `${param} must be greater than ${schema.exclusiveMinimum} (got ${value})` };
      if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum)
        return { error: `${param} must be less than ${schema.exclusiveMaximum} (got ${value})` };
      if (typeof schema.multipleOf === 'number' && schema.multipleOf > 0) {
        const ratio = value / schema.multipleOf;
        if (Math.abs(ratio - Math.round(ratio)) > 1e-9) return { error: `${param} must be a multiple of ${schema.multipleOf}` };
      }
      return { value };
    };
  } else if (kind === 'string') {
    const pattern = compilePattern(schema.pattern);
    const colour = isColourPattern(schema);
    const long = typeof schema.maxLength !== 'number' || schema.maxLength > 120;
    input =
      long && !colour && !schema.pattern
        ? el('textarea', { id, name: param, rows: 2, maxlength: schema.maxLength, spellcheck: 'false' })
        : el('input', {
            type: 'text',
            id,
            name: param,
            maxlength: schema.maxLength,
            spellcheck: 'false',
            placeholder: colour ? '#rrggbb' : undefined,
          });
    if (typeof schema.default === 'string') input.value = schema.default;
    if (colour) {
      const picker = el('input', { type: 'color', class: 'swatch', 'data-color-for': param, 'aria-label': `${param} colour picker` });
      const sync = () => {
        if (/^#[0-9a-f]{6}$/i.test(input.value.trim())) picker.value = input.value.trim().toLowerCase();
      };
      sync();
      picker.addEventListener('input', () => {
        input.value = picker.value;
        clearFieldError(input);
      });
      input.addEventListener('input', sync);
      extra = picker;
    }
    if (schema.pattern && !colour) help.push(el('code', { text: `/${schema.pattern}/` }));
    if (colour) help.push('#rrggbb');
    if (typeof schema.minLength === 'number' && typeof schema.maxLength === 'number')
      help.push(`${schema.minLength}–${schema.maxLength} chars`);
    else if (typeof schema.maxLength === 'number') help.push(`max ${schema.maxLength} chars`);
    else if (typeof schema.minLength === 'number') help.push(`min ${schema.minLength} chars`);
    read = () => {
      const value = input.value;
      if (value === '') {
        if (!required) return {};
        if (pattern || (schema.minLength ?? 0) > 0) return { error: `${param} is required` };
      }
      const length = [...value].length;
      if (typeof schema.minLength === 'number' && length < schema.minLength)
        return { error: `${param} must be at least ${schema.minLength} characters` };
      if (typeof schema.maxLength === 'number' && length > schema.maxLength)
        return { error: `${param} must be at most ${schema.maxLength} characters (got ${length})` };
      if (pattern && !pattern.test(value))
        return { error: colour ? `${param} must be a colour like #00ff00` : `${param} must match /${schema.pattern}/` };
      return { value };
    };
  } else {
    input = el('textarea', { id, name: param, rows: 3, spellcheck: 'false', placeholder: 'JSON', class: 'mono' });
    if (schema.default !== undefined) input.value = JSON.stringify(schema.default);
    help.push(`JSON${schema.type ? ` (${[].concat(schema.type).join(' | ')})` : ''}`);
    read = () => {
      const text = input.value.trim();
      if (text === '') return required ? { error: `${param} is required` } : {};
      try {
        return { value: JSON.parse(text) };
      } catch (error) {
        return { error: `${param} is not valid JSON: ${error.message}` };
      }
    };
  }

  input.addEventListener('input', () => clearFieldError(input));
  input.addEventListener('change', () => clearFieldError(input));
  const description = typeof schema.description === 'string' ? schema.description : undefined;
  if (schema.default !== undefined && kind !== 'boolean')
    help.push(`default ${typeof schema.default === 'string' ? schema.default : JSON.stringify(schema.default)}`);
  const control =
    kind === 'boolean'
      ? el('label', { class: 'check' }, input, el('span', { text: description ?? param }))
      : el('div', { class: 'control' }, extra && extra.type === 'color' ? extra : null, input);
  const node = el(
    'div',
    { class: `field field-${kind}`, 'data-field': param },
    el(
      'label',
      { class: 'field-label', for: id },
      el('span', { class: 'param', text: param }),
      required ? el('span', { class: 'req', title: 'required', text: '*' }) : null,
      el('span', { class: 'type', text: kind === 'json' ? 'json' : kind }),
    ),
    control,
    extra && extra.type === 'range' ? extra : null,
    help.length || (description && kind !== 'boolean')
      ? el(
          'div',
          { class: 'field-help' },
          description && kind !== 'boolean' ? el('span', { text: description }) : null,
          ...help.map((h) => el('span', {}, h)),
        )
      : null,
    el('div', { class: 'field-error', 'data-error-for': param, role: 'alert' }),
  );
  return { node, input, name: param, read };
}

function setFieldError(form, param, message) {
  const box = byData('error-for', param, form);
  if (box) box.textContent = message;
  const input = form.elements.namedItem(param);
  if (input && 'setAttribute' in input) input.setAttribute('aria-invalid', 'true');
  byData('field', param, form)?.classList.add('invalid');
}

function clearFieldError(input) {
  const form = input.form;
  if (!form) return;
  input.removeAttribute('aria-invalid');
  const box = byData('error-for', input.name, form);
  if (box) box.textContent = '';
  byData('field', input.name, form)?.classList.remove('invalid');
}

function showResult(result, state, ...content) {
  result.dataset.state = state;
  result.replaceChildren(...content.filter((part) => part !== null && part !== undefined));
}

async function submitCommand(form, name, fields, result) {
  for (const field of fields) clearFieldError(field.input);
  const data = {};
  const problems = [];
  for (const field of fields) {
    const outcome = field.read();
    if (outcome.error) {
      problems.push(outcome.error);
      setFieldError(form, field.name, outcome.error);
    } else if ('value' in outcome) {
      data[field.name] = outcome.value;
    }
  }
  if (problems.length) {
    showResult(
      result,
      'invalid',
      el('span', { class: 'result-label', text: 'Not sent' }),
      ` ${problems.length === 1 ? problems[0] : `${problems.length} fields need fixing`}`,
    );
    form.querySelector('[aria-invalid="true"]')?.focus();
    return;
  }
  const client = app.client;
  if (!client || app.status !== 'ready') {
    showResult(result, 'error', el('span', { class: 'result-label', text: 'not_ready' }), ' Connect first.');
    return;
  }
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  showResult(result, 'pending', 'Sending…');
  log('command', '', { type: name, data });
  const started = performance.now();
  try {
    const reply = await client.sendCommand(name, data);
    const ms = Math.round(performance.now() - started);
    if (reply === undefined) {
      showResult(result, 'ok', el('span', { class: 'result-label', text: 'ok' }), el('span', { class: 'result-ms', text: `${ms} ms` }));
    } else {
      showResult(
        result,
        'ok',
        el('span', { class: 'result-label', 'data-reply-type': reply.type, text: reply.type }),
        el('span', { class: 'result-ms', text: `${ms} ms` }),
        reply.data === undefined ? null : el('pre', { class: 'result-data', text: JSON.stringify(reply.data, null, 2) }),
      );
    }
  } catch (error) {
    const { code, message, field } = describeError(error);
    showResult(
      result,
      'error',
      el('span', { class: 'result-label', 'data-error-code': code, text: code }),
      ` ${message}`,
      field ? el('span', { class: 'result-field', 'data-error-field': field, text: `field ${field}` }) : null,
    );
    // A JSON-pointer field such as "/speed" points at one of this form's inputs.
    const param = field?.replace(/^\//, '').split('/')[0];
    if (param && fields.some((f) => f.name === param)) setFieldError(form, param, `${code}: ${message}`);
    logError(error, name);
  } finally {
    button.disabled = app.status !== 'ready';
  }
}

// ---------------------------------------------------------------------------
// Clips
// ---------------------------------------------------------------------------

function updateClipButtons() {
  const ready = app.status === 'ready';
  $('#clip').disabled = !ready || app.clipBusy;
  $('#download').disabled = !ready || app.clipBusy || !app.clip;
}

function formatBytes(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(0)} kB`;
}

/** A line of the Clips panel: shown with `content`, hidden with none. */
function showClipLine(line, state, ...content) {
  line.dataset.state = state ?? '';
  line.replaceChildren(...content);
  line.hidden = content.length === 0;
}

/** Both clip actions: one at a time, and a failure goes where connection problems go (banner + log). */
async function clipAction(what, action) {
  const client = app.client;
  if (!client || app.status !== 'ready' || app.clipBusy) return;
  app.clipBusy = true;
  updateClipButtons();
  setProblem(undefined);
  try {
    await action(client);
  } catch (error) {
    const { code, message } = describeError(error);
    setProblem(`${what} failed — ${code}: ${message}`);
    logError(error, what);
  } finally {
    app.clipBusy = false;
    updateClipButtons();
  }
}

function requestClip() {
  return clipAction('Clip', async (client) => {
    const clip = await client.requestClip(CLIP_SECONDS);
    app.clip = clip;
    const info = $('#clip-info');
    info.dataset.duration = String(clip.durationSeconds);
    showClipLine(
      info,
      'done',
      el('span', { class: 'result-label', text: `${clip.durationSeconds.toFixed(1)} s` }),
      el('a', {
        id: 'clip-link',
        href: clip.playlistUrl,
        target: '_blank',
        rel: 'noopener',
        title: 'HLS (fMP4) playlist, presigned: open it in an HLS player (Safari, VLC, ffplay)',
        text: 'playlist.m3u8',
      }),
      el('span', { class: 'hint', text: ` · valid until ${new Date(clip.expiresAt).toLocaleString()}` }),
    );
    // The previous clip's download line would describe a file this clip is not.
    showClipLine($('#clip-progress'));
    delete $('#clip-progress').dataset.bytes;
    // No log line: the clip_ready reply is already logged as a message.
  });
}

function downloadClip() {
  const progress = $('#clip-progress');
  return clipAction('Download', async (client) => {
    const clip = app.clip;
    if (!clip) return;
    delete progress.dataset.bytes;
    showClipLine(progress, 'pending', 'Downloading…');
    // The client library fetches playlist, init and segments, joins them into one MP4 and saves it
    // through an <a download> under its default name (no filename given: the browser test checks
    // that default, arclight-clip.mp4, on the file Chromium saves).
    let blob;
    try {
      blob = await client.downloadClipAsFile(clip, undefined, {
        onProgress: (fetched, total, bytes) => showClipLine(progress, 'pending', `${fetched}/${total} files, ${formatBytes(bytes)}`),
      });
    } catch (error) {
      showClipLine(progress, 'error', 'Download failed.');
      throw error;
    }
    progress.dataset.bytes = String(blob.size);
    showClipLine(
      progress,
      'done',
      el('span', { class: 'result-label', text: 'saved' }),
      `${DEFAULT_CLIP_FILENAME}, ${formatBytes(blob.size)}`,
    );
    log('info', `saved ${DEFAULT_CLIP_FILENAME} (${blob.size} bytes)`, { type: 'clip_download' });
  });
}

// ---------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------

function formatNumber(value, digits) {
  return typeof value === 'number' && Number.isFinite(value) ? value.toFixed(digits) : '–';
}

/**
 * Each output video track's playout from the runtime's media_stats, one line per track: the rate it
 * plays at now, and under it how it is paced — "fixed", or "adaptive · model 16.4 fps" (the
 * production estimate the adaptive rate follows). The numbers also ride as data-* attributes
 * (data-track, data-mode, data-fps, data-production-fps) for tests and tools.
 */
function playoutLines(quality) {
  const tracks = Object.entries(quality?.tracks ?? {}).filter(([, t]) => t?.playout && typeof t.playout.fps === 'number');
  return tracks.map(([name, { playout }]) => {
    const production = playout.mode === 'adaptive' && typeof playout.production_fps === 'number' ? playout.production_fps : undefined;
    const detail = production === undefined ? playout.mode : `${playout.mode} · model ${formatNumber(production, 1)} fps`;
    const line = el(
      'span',
      {
        class: 'playout-line',
        'data-track': name,
        'data-mode': playout.mode,
        'data-fps': String(playout.fps),
        title:
          playout.mode === 'adaptive'
            ? 'Adaptive playout: the rate follows the rate the model produces frames at ("model"), within the track\'s range'
            : "Fixed playout: the track's declared fps",
      },
      el('span', {
        class: 'playout-rate',
        text: `${tracks.length > 1 ? `${name}: ` : ''}${formatNumber(playout.fps, playout.fps % 1 === 0 ? 0 : 1)}`,
      }),
      el('small', { text: 'fps' }),
      el('span', { class: 'playout-detail', text: detail }),
    );
    if (production !== undefined) line.dataset.productionFps = String(production);
    return line;
  });
}

function renderStats(stats) {
  const set = (key, text) => {
    const node = $(`#stats [data-stat="${key}"]`);
    if (node) node.textContent = text;
  };
  set('fps', formatNumber(stats?.framesPerSecond, 1));
  set('rtt', formatNumber(stats?.rtt, stats?.rtt !== undefined && stats.rtt < 10 ? 1 : 0));
  set('bitrate', formatNumber(stats?.bitrate === undefined ? undefined : stats.bitrate / 1000, 0));
  set('framesDecoded', formatNumber(stats?.framesDecoded, 0));
  set('framesDropped', formatNumber(stats?.framesDropped, 0));
  set('packetLoss', formatNumber(stats?.packetLossRatio === undefined ? undefined : stats.packetLossRatio * 100, 2));
  const latency = stats?.latency?.[0];
  set('latency', latency ? `${formatNumber(latency.p50, 0)} / ${formatNumber(latency.p95, 0)}` : '–');
  const playout = $('#stats [data-stat="playout"]');
  if (playout) {
    const lines = playoutLines(stats?.quality);
    if (lines.length > 0) playout.replaceChildren(...lines);
    else playout.textContent = '–';
  }
  $('#stats').title = stats?.candidateType ? `ICE candidate: ${stats.candidateType}` : '';
}

// ---------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------

function wire(client) {
  const mine =
    (fn) =>
    (...args) => {
      if (app.client === client) fn(...args);
    };
  client.on(
    'statusChanged',
    mine((status) => {
      setStatus(status);
      log('status', status, { type: 'status' });
      if (status === 'ready') {
        // Built-in glass-to-glass measurement for every output video shown on this page.
        for (const video of $$('video[data-track]')) {
          client.trackLatency(video.dataset.track, video).catch((error) => logError(error, 'latency'));
        }
      }
      if (status === 'disconnected') {
        stopAllLocal();
        detachTracks();
        renderStats(undefined);
        if (app.reconnectAfterReload) {
          app.reconnectAfterReload = false;
          void reloadChain.then(async () => {
            // The schema may not show the new tracks yet: read it again before the players are built.
            try {
              app.schema = await loadSchema();
            } catch (error) {
              logError(error, 'schema');
            }
            const values = formValues();
            app.pendingTracks = undefined;
            app.tracks = Array.isArray(app.schema['x-arclight']?.tracks) ? app.schema['x-arclight'].tracks : [];
            renderHeader();
            renderTracks();
            renderCommands();
            restoreFormValues(values);
            setStatus(app.status);
            log('info', 'reconnecting to the reloaded model');
            await connect();
          });
        }
      }
    }),
  );
  client.on(
    'sessionIdChanged',
    mine((sessionId) => {
      $('#session-id').textContent = sessionId ? `session ${sessionId}` : '';
    }),
  );
  client.on(
    'trackReceived',
    mine((name, track) => attachTrack(name, track)),
  );
  client.on(
    'message',
    mine((message) =>
      log('message', message.request_id ? `(reply to ${message.request_id})` : '', { type: message.type, data: message.data }),
    ),
  );
  client.on(
    'runtimeMessage',
    mine((message) => {
      if (QUIET_RUNTIME_MESSAGES.has(message.type)) return;
      if (message.type === 'model_reloaded') void modelReloaded(undefined);
      // A failure of one of our own requests is logged (as an error) by whoever awaited it.
      if (message.type === 'command_failed' && message.request_id) return;
      log('runtime', '', { type: message.type, data: message.data });
    }),
  );
  client.on(
    'statsUpdate',
    mine((stats) => renderStats(stats)),
  );
  // Listening is what makes the client follow the session's log (while it is ready).
  client.on(
    'log',
    mine((line) => sessionLogLine(line)),
  );
  client.on(
    'sessionEnded',
    mine((reason) => {
      log('info', `session ended: ${reason}`, { type: 'session_ended' });
      if (reason === 'model_reloaded') {
        // The model's tracks changed: a new session, with the new players, as soon as this one is gone.
        app.reconnectAfterReload = true;
        return;
      }
      if (reason === 'shutdown') {
        // The runtime is stopping (a restart, say): connect again once its event stream is back.
        app.reconnectWhenBack = true;
        setProblem('The runtime shut down. The page connects again when it is back.');
        return;
      }
      setProblem(`The session ended (${reason}). Connect again to start a new one.`);
    }),
  );
  client.on(
    'error',
    mine((error) => {
      logError(error);
      if (error?.code === 'connection_failed' && app.status !== 'ready') setProblem(`${error.code}: ${error.message}`);
    }),
  );
}

// ---------------------------------------------------------------------------
// Model reloads and load state (arclight dev)
// ---------------------------------------------------------------------------

/** Every command form's field values, by command and field name. */
function formValues() {
  const values = new Map();
  for (const form of $$('form[data-command]')) {
    const fields = new Map();
    for (const input of $$('[name]', form))
      fields.set(input.name, input.type === 'checkbox' ? { checked: input.checked } : { value: input.value });
    values.set(form.dataset.command, fields);
  }
  return values;
}

/** Puts back the values of fields whose command and name still exist (and whose value the control accepts). */
function restoreFormValues(values) {
  for (const form of $$('form[data-command]')) {
    const fields = values.get(form.dataset.command);
    if (!fields) continue;
    for (const input of $$('[name]', form)) {
      const saved = fields.get(input.name);
      if (!saved) continue;
      if ('checked' in saved && input.type === 'checkbox') input.checked = saved.checked;
      else if ('value' in saved && input.type !== 'checkbox') {
        input.value = saved.value;
        // A select without that option any more keeps its default.
        if (input.value !== saved.value) continue;
        input.dispatchEvent(new Event('input'));
      }
    }
  }
}

let reloadChain = Promise.resolve();

/** A new version of the model serves: refresh what the page shows of it, keeping what was typed. */
function modelReloaded(version) {
  reloadChain = reloadChain.then(async () => {
    if (app.shownVersion !== undefined && version !== undefined && version <= app.shownVersion) return;
    let schema;
    try {
      schema = await loadSchema();
    } catch (error) {
      logError(error, 'schema');
      return;
    }
    if (version !== undefined) app.shownVersion = version;
    const values = formValues();
    app.schema = schema;
    renderHeader();
    const tracks = Array.isArray(schema['x-arclight']?.tracks) ? schema['x-arclight'].tracks : [];
    // The players stay while the session does (same tracks); new tracks mean a new session anyway.
    if (JSON.stringify(tracks) !== JSON.stringify(app.tracks) && app.status === 'disconnected') {
      app.tracks = tracks;
      renderTracks();
    } else if (JSON.stringify(tracks) !== JSON.stringify(app.tracks)) {
      app.pendingTracks = tracks;
    }
    renderCommands();
    restoreFormValues(values);
    setStatus(app.status);
    showLoadError(null);
    const notice = $('#reload-notice');
    notice.textContent = `Reloaded ${app.modelName ?? 'the model'}${version !== undefined ? ` (version ${version})` : ''} at ${timestamp()}`;
    notice.dataset.version = String(version ?? '');
    notice.hidden = false;
    log('info', `model reloaded${version !== undefined ? ` (version ${version})` : ''}`, { type: 'model_reloaded' });
  });
  return reloadChain;
}

/** Shows (or, with null, hides) where the model failed to load. */
function showLoadError(error) {
  const box = $('#load-error');
  box.hidden = !error;
  if (!error) return;
  const where = error.file ? `${error.file}${error.line ? `:${error.line}${error.column ? `:${error.column}` : ''}` : ''}` : '';
  $('#load-error-where').textContent = where;
  $('#load-error-detail').textContent = `${error.message}${error.frame ? `\n\n${error.frame}` : ''}`;
  $('#reload-notice').hidden = true;
}

function showLoadProgress(event) {
  const box = $('#model-load');
  if (event.phase !== 'loading') {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const bar = $('#model-load-progress');
  if (typeof event.progress === 'number') bar.value = event.progress;
  else bar.removeAttribute('value');
  $('#model-load-text').textContent =
    `Loading the model${event.message ? ` — ${event.message}` : ''}${typeof event.progress === 'number' ? ` (${Math.round(event.progress * 100)} %)` : ''}`;
}

/** Follows the runtime's event stream for the model's load state (EventSource reconnects by itself). */
function followRuntimeEvents() {
  if (typeof EventSource === 'undefined') return;
  // The stream starts with the events it still keeps: replayed in order, they end in the current state
  // (versions the page already shows are skipped by modelReloaded).
  const source = new EventSource('/events');
  source.addEventListener('model_load', (message) => {
    const event = JSON.parse(message.data);
    showLoadProgress(event);
    if (event.phase === 'failed' && event.error) showLoadError(event.error);
    if (event.phase === 'loaded') showLoadError(null);
  });
  source.addEventListener('model_reloaded', (message) => void modelReloaded(JSON.parse(message.data).version));
  // The runtime went away (restarted, say): when the stream is back, so is a runtime — maybe with
  // another model version. Re-read it, and connect again if the page was connected when it went.
  let lost = false;
  source.addEventListener('error', () => {
    if (lost) return;
    lost = true;
    app.reconnectWhenBack ||= app.status !== 'disconnected';
  });
  source.addEventListener('open', () => {
    if (!lost) return;
    lost = false;
    app.shownVersion = undefined;
    void loadDevStatus()
      .then(() => modelReloaded(undefined))
      .then(async () => {
        if (!app.reconnectWhenBack) return;
        app.reconnectWhenBack = false;
        // The old session died with the old process; wait for the client to notice, then start anew.
        for (let i = 0; i < 100 && app.status !== 'disconnected'; i++) await new Promise((resolve) => setTimeout(resolve, 100));
        if (app.status === 'disconnected') await connect();
      });
  });
}

/** arclight dev: the serving version and the last load error (absent elsewhere: 404). */
async function loadDevStatus() {
  try {
    const response = await fetch('/dev/status', { headers: { accept: 'application/json' } });
    if (!response.ok) return;
    const status = await response.json();
    app.shownVersion = status.version;
    if (status.error) showLoadError(status.error);
  } catch {
    // not in dev mode
  }
}

async function connect() {
  if (!app.modelName || app.status !== 'disconnected') return;
  setProblem(undefined);
  const hosted = app.mode === 'hosted' && app.hosted ? app.hosted : undefined;
  let client;
  try {
    client = hosted
      ? new ArclightClient({ modelName: app.modelName, apiUrl: hosted.coordinator_url })
      : new ArclightClient({ modelName: app.modelName, local: true, localRuntimeUrl: location.origin });
  } catch (error) {
    logError(error, 'connect');
    setProblem(describeError(error).message);
    return;
  }
  app.client = client;
  app.clientMode = hosted ? 'hosted' : 'local';
  app.token = undefined;
  $('#session-log').replaceChildren();
  wire(client);
  renderStats(undefined);
  if (hosted) log('info', `hosted mode: through the coordinator at ${hosted.coordinator_url}`);
  try {
    await client.connect(hosted ? playgroundToken(client) : undefined);
  } catch (error) {
    if (app.client !== client) return;
    const { code, message } = describeError(error);
    logError(error, 'connect');
    let hint = '';
    if (code === 'session_conflict')
      hint = ' Another client holds the runtime\u2019s session; close it (or wait for it to time out) and try again.';
    else if (hosted && code === 'timeout')
      hint = ' The coordinator found no free GPU slot in time: each hosted runtime serves one session at a time.';
    setProblem(`Connect failed — ${code}: ${message}${hint}`);
    setStatus(client.getStatus());
  }
}

/**
 * Hosted mode: the token resolver for one connect. The client asks for a token before every
 * request of the session, and only the token that created the session may act on it, so the
 * token is minted once (by this page's runtime, which holds the API key) and again only near
 * expiry. A new connect gets a new token: a token may create at most max_sessions sessions.
 */
function playgroundToken(client) {
  const resolve = cacheToken(async () => {
    const response = await fetch('/playground/token', { method: 'POST' });
    const body = await response.json().catch(() => ({}));
    if (!response.ok || typeof body.token !== 'string') {
      throw new ArclightError(
        typeof body.code === 'string' ? body.code : 'internal_error',
        body.message ?? `POST /playground/token answered ${response.status}.`,
        { status: response.status },
      );
    }
    return { token: body.token, expiresAt: body.expires_at * 1000 };
  });
  return async () => {
    const token = await resolve();
    if (app.client === client) app.token = token;
    return token;
  };
}

async function disconnect() {
  const client = app.client;
  if (!client) return;
  $('#disconnect').disabled = true;
  try {
    await client.disconnect();
  } catch (error) {
    logError(error, 'disconnect');
  }
  stopAllLocal();
  detachTracks();
  setStatus(client.getStatus());
}

/** Ends the session when the page goes away, so a reload does not find it still held. */
function endOnPageHide() {
  const sessionId = app.client?.getSessionId();
  if (!sessionId) return;
  try {
    if (app.clientMode === 'hosted') {
      // The coordinator ends it on the runtime too (and stops billing).
      if (!app.token || !app.hosted) return;
      void fetch(`${app.hosted.coordinator_url}/sessions/${encodeURIComponent(sessionId)}`, {
        method: 'DELETE',
        keepalive: true,
        headers: { authorization: `Bearer ${app.token}` },
      }).catch(() => {});
      return;
    }
    void fetch('/stop_session', {
      method: 'POST',
      keepalive: true,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: sessionId, reason: 'playground_closed' }),
    }).catch(() => {});
  } catch {
    // best effort
  }
}

// ---------------------------------------------------------------------------
// Boot
// ---------------------------------------------------------------------------

async function loadSchema() {
  const response = await fetch('/schema', { headers: { accept: 'application/json' } });
  if (!response.ok) {
    let detail = '';
    try {
      const body = await response.json();
      detail = body?.message ? `: ${body.code ?? ''} ${body.message}` : '';
    } catch {
      // not JSON
    }
    throw new Error(`GET /schema answered ${response.status}${detail}`);
  }
  return response.json();
}

/** What the runtime offers besides local mode; a runtime without the route offers nothing more. */
async function loadConfig() {
  try {
    const response = await fetch('/playground/config', { headers: { accept: 'application/json' } });
    return response.ok ? await response.json() : { hosted: null };
  } catch {
    return { hosted: null };
  }
}

function renderModePicker() {
  const picker = $('#mode-picker');
  picker.hidden = !app.hosted;
  if (!app.hosted) return;
  picker.title = `${picker.title} Coordinator: ${app.hosted.coordinator_url}`;
  $('#mode').value = app.mode;
  $('#mode').addEventListener('change', (event) => {
    app.mode = event.target.value === 'hosted' ? 'hosted' : 'local';
    log('info', app.mode === 'hosted' ? `mode: hosted, through ${app.hosted.coordinator_url}` : 'mode: local runtime');
  });
}

async function boot() {
  $('#connect').addEventListener('click', () => void connect());
  $('#disconnect').addEventListener('click', () => void disconnect());
  $('#latency-mode').addEventListener('change', async (event) => {
    const select = event.target;
    const mode = select.value;
    try {
      await app.client.setLatencyMode(mode);
      log('info', `latency mode: ${mode}`);
    } catch (error) {
      select.value = mode === 'realtime' ? 'smooth' : 'realtime';
      logError(error, 'latency mode');
    }
  });
  $('#log-clear').addEventListener('click', () => $('#log').replaceChildren());
  $('#session-log-runtime').addEventListener('change', (event) => {
    $('#session-log').dataset.runtimeLines = event.target.checked ? 'shown' : 'hidden';
  });
  $('#clip').addEventListener('click', () => void requestClip());
  $('#download').addEventListener('click', () => void downloadClip());
  window.addEventListener('pagehide', endOnPageHide);
  app.hosted = (await loadConfig()).hosted ?? null;
  renderModePicker();
  try {
    app.schema = await loadSchema();
  } catch (error) {
    $('#model-name').textContent = 'Model unavailable';
    $('#commands').replaceChildren(el('p', { class: 'empty', text: 'No schema.' }));
    setProblem(`Could not load the model interface: ${error.message}`);
    logError(error, 'schema');
    return;
  }
  renderHeader();
  app.tracks = Array.isArray(app.schema['x-arclight']?.tracks) ? app.schema['x-arclight'].tracks : [];
  renderTracks();
  renderCommands();
  setStatus('disconnected');
  await loadDevStatus();
  followRuntimeEvents();
  log(
    'info',
    `loaded ${app.modelName}${app.schema['x-arclight']?.model?.version ? ` ${app.schema['x-arclight'].model.version}` : ''}: ${app.tracks.length} track(s), ${Object.keys(app.schema['x-arclight']?.commands ?? {}).length} command(s)`,
  );
}

/** For debugging from the console: `playground.client`. */
window.playground = app;

boot().catch((error) => {
  console.error(error);
  setProblem(`The playground failed to start: ${error?.message ?? error}`);
});
