// Arclight account dashboard: plain browser JavaScript, no framework, no build step.
//
// Everything it shows or changes goes through the documented platform API (docs/coordinator.md,
// docs/dashboard.md) with the session cookie the sign-in set (HttpOnly: this script never sees
// it); every change carries the session's CSRF token in X-Arclight-CSRF.
//
// Longer than ~400 lines: a page script served as is (no build step), one section per view
// (overview, usage, sessions, keys, credits).

const CSRF_HEADER = 'X-Arclight-CSRF';
const VIEWS = ['overview', 'usage', 'sessions', 'keys', 'credits'];
const DAY_MS = 86_400_000;

/** What the page knows: the sign-in answer, GET /pricing, GET /platform/account. */
const state = {
  session: null,
  pricing: null,
  account: null,
  /** A sign-in link's token, taken out of the URL on load. */
  linkToken: null,
  view: null,
};

class ApiError extends Error {
  constructor(status, body) {
    super(body && typeof body.message === 'string' ? body.message : `The service answered ${status}.`);
    this.status = status;
    this.code = body && typeof body.code === 'string' ? body.code : 'http_error';
    this.field = body && typeof body.field === 'string' ? body.field : undefined;
  }
}

const $ = (selector, root = document) => root.querySelector(selector);

/** A platform API call with the cookie; JSON in and out; throws ApiError with the service's {code, message, field}. */
async function api(method, path, body, extraHeaders = {}) {
  const headers = { Accept: 'application/json', ...extraHeaders };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && state.session) headers[CSRF_HEADER] = state.session.csrf_token;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch {
    throw new ApiError(0, { code: 'network_error', message: 'The service could not be reached. Check your connection and try again.' });
  }
  let parsed = null;
  const text = await response.text();
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, parsed);
    // The session ended (expired, signed out elsewhere, its key revoked): back to sign-in.
    if (response.status === 401 && !path.startsWith('/platform/dashboard/')) signedOut('Your dashboard session has ended. Sign in again.');
    throw error;
  }
  return parsed;
}

// ---- formatting ----

const numberFormat = new Intl.NumberFormat('en-US');
const fmtInt = (n) => numberFormat.format(Math.round(n));
function fmtUsd(dollars) {
  if (dollars === 0) return '$0.00';
  if (Math.abs(dollars) >= 0.01) return `$${dollars.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return `$${dollars.toLocaleString('en-US', { maximumSignificantDigits: 2 })}`;
}
const creditsPerDollar = () => state.pricing?.settings.credits_per_dollar ?? 10_000;
const usd = (credits) => fmtUsd(credits / creditsPerDollar());
const fmtDate = (ms) => new Date(ms).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric' });
const fmtDateTime = (ms) => new Date(ms).toLocaleString('en-US', { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
function fmtDuration(seconds) {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min${seconds % 60 ? ` ${seconds % 60} s` : ''}`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}
function inDays(ms) {
  const days = Math.ceil((ms - Date.now()) / DAY_MS);
  return days <= 1 ? 'within a day' : `in ${days} days`;
}
const shortId = (id) => (id.length > 8 ? `${id.slice(0, 8)}…` : id);

/** A table cell; `label` is what a phone shows beside it (the column's name). */
function cell(content, options = {}) {
  const td = document.createElement('td');
  if (options.className) td.className = options.className;
  if (content instanceof Node) td.append(content);
  else td.textContent = content;
  if (options.title) td.title = options.title;
  return td;
}

/** Fills a table's body; every cell gets its column's name as `data-label` (phones show rows as cards). */
function fillTable(table, rows, emptyText) {
  const labels = [...table.tHead.rows[0].cells].map((th) => th.textContent.trim());
  const body = table.tBodies[0];
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(emptyText, { className: 'empty' });
    td.colSpan = labels.length;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const cells of rows) {
    const tr = document.createElement('tr');
    cells.forEach((td, i) => {
      td.dataset.label = labels[i] === 'Actions' ? '' : (labels[i] ?? '');
      tr.append(td);
    });
    body.append(tr);
  }
}

function pill(text, tone) {
  const span = document.createElement('span');
  span.className = 'pill';
  span.textContent = text;
  if (tone) span.dataset.tone = tone;
  return span;
}

function button(text, className, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `btn small ${className}`.trim();
  b.textContent = text;
  b.addEventListener('click', onClick);
  return b;
}

/** A form's message line: `state` ok or error; the field named by the service gets aria-invalid. */
function say(target, text, tone) {
  const el = typeof target === 'string' ? $(target) : target;
  el.textContent = text;
  if (tone) el.dataset.state = tone;
  else delete el.dataset.state;
}

function clearInvalid(form) {
  for (const input of form.querySelectorAll('[aria-invalid]')) input.removeAttribute('aria-invalid');
}

function markInvalid(form, name) {
  const input = name && form.querySelector(`[name="${name}"]`);
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }
}

/** The service's error, in words, for a form; marks the field it names (`/dollars` → the dollars input). */
function showError(form, msg, error) {
  const field = error.field && error.field.startsWith('/') ? error.field.slice(1) : undefined;
  markInvalid(form, field);
  say(msg, error.message, 'error');
}

/** Runs a form's action with its submit button disabled; errors go to its message line. */
async function submitting(form, msg, action) {
  const submit = form.querySelector('button[type="submit"]');
  clearInvalid(form);
  say(msg, '');
  submit.disabled = true;
  try {
    await action();
  } catch (error) {
    if (error instanceof ApiError) showError(form, msg, error);
    else say(msg, String(error), 'error');
  } finally {
    submit.disabled = false;
  }
}

/** A whole number from an input, or a client-side error naming it (the service checks again). */
function wholeNumber(form, name, what) {
  const input = form.querySelector(`[name="${name}"]`);
  const text = input.value.trim();
  if (!/^\d+$/.test(text)) {
    const error = new ApiError(400, { code: 'invalid_request', message: `${what} must be a whole number.`, field: `/${name}` });
    throw error;
  }
  return Number(text);
}

// ---- sign-in ----

function showBanner(text) {
  const banner = $('#banner');
  banner.textContent = text;
  banner.hidden = !text;
}

function signedOut(message) {
  state.session = null;
  state.account = null;
  $('#who').hidden = true;
  $('#tabs').hidden = true;
  for (const view of document.querySelectorAll('.view')) view.hidden = true;
  $('#view-signin').hidden = false;
  $('#link-form').hidden = state.linkToken === null;
  $('#signin-form').hidden = state.linkToken !== null;
  showBanner(message ?? '');
  document.title = 'Sign in · Arclight dashboard';
}

async function signedIn(session) {
  state.session = session;
  state.linkToken = null;
  showBanner('');
  $('#api-key').value = '';
  $('#account-name').textContent = session.account.name;
  $('#who').hidden = false;
  $('#tabs').hidden = false;
  $('#view-signin').hidden = true;
  state.pricing = await api('GET', '/pricing');
  await route(true);
}

$('#signin-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const key = $('#api-key').value.trim();
  void submitting(form, '#signin-msg', async () => {
    if (!key) throw new ApiError(400, { code: 'invalid_request', message: 'Enter an API key (rk_…).', field: '/api_key' });
    const session = await api('POST', '/platform/dashboard/sign-in', { api_key: key });
    await signedIn(session);
  });
});

$('#link-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  void submitting(form, '#link-msg', async () => {
    try {
      await signedIn(await api('POST', '/platform/dashboard/sign-in', { link: state.linkToken }));
    } catch (error) {
      // A used or expired link cannot work again: offer the key form instead.
      state.linkToken = null;
      $('#signin-form').hidden = false;
      throw error;
    }
  });
});

$('#sign-out').addEventListener('click', async () => {
  try {
    await api('POST', '/platform/dashboard/sign-out');
  } finally {
    signedOut('You are signed out.');
    $('#api-key').focus();
  }
});

// ---- views ----

async function route(focus) {
  const name = location.hash.slice(1);
  const view = VIEWS.includes(name) ? name : 'overview';
  state.view = view;
  for (const v of VIEWS) $(`#view-${v}`).hidden = v !== view;
  for (const tab of document.querySelectorAll('#tabs a')) {
    if (tab.dataset.tab === view) tab.setAttribute('aria-current', 'page');
    else tab.removeAttribute('aria-current');
  }
  if (focus) clearMessages();
  const title = $(`#view-${view} h1`).textContent;
  document.title = `${title} · Arclight dashboard`;
  if (focus) $(`#view-${view} h1`).focus();
  await load(view);
}

async function load(view) {
  try {
    await LOADERS[view]();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return;
    showBanner(error instanceof Error ? error.message : String(error));
  }
}

window.addEventListener('hashchange', () => {
  // A sign-in link opened in this tab: offer it (its session replaces the current one).
  if (takeLinkToken()) {
    signedOut();
    $('#link-form button').focus();
    return;
  }
  if (state.session) void route(true);
});

/** Takes a sign-in link's token (`#link=…`, never sent to a server) out of the address bar and history. */
function takeLinkToken() {
  const match = /^#link=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match) return false;
  state.linkToken = match[1];
  history.replaceState(null, '', location.pathname);
  return true;
}
for (const refresh of document.querySelectorAll('[data-refresh]')) {
  refresh.addEventListener('click', () => {
    clearMessages();
    void load(state.view);
  });
}

/** What earlier actions said (and the fields they marked) is cleared when a screen is shown or refreshed. */
function clearMessages() {
  showBanner('');
  for (const msg of document.querySelectorAll('main .form-msg')) say(msg, '');
  for (const form of document.querySelectorAll('main form')) clearInvalid(form);
}

const LOADERS = {
  async overview() {
    const [account, balance, usage] = await Promise.all([
      api('GET', '/platform/account'),
      api('GET', '/platform/balance'),
      api('GET', `/platform/usage?since=${monthStart()}`),
      // Pricing may have changed since sign-in.
      api('GET', '/pricing').then((pricing) => (state.pricing = pricing)),
    ]);
    state.account = account;
    const models = await api('GET', '/platform/models');
    $('#ov-balance').textContent = `${fmtInt(balance.credits)} credits`;
    $('#ov-balance-usd').textContent = usd(balance.credits);
    $('#ov-open').textContent = `${account.open_sessions} of ${account.quotas.concurrent_sessions}`;
    $('#ov-open-sub').textContent = 'sessions open (concurrency quota)';
    const { spent_credits: spent, cap_credits: cap } = usage.month;
    $('#ov-month').textContent = usd(spent);
    $('#ov-month-sub').textContent =
      cap > 0 ? `${fmtInt(spent)} of a ${fmtInt(cap)}-credit cap (${usd(cap)})` : `${fmtInt(spent)} credits; no billing cap`;

    fillTable(
      $('#grants-table'),
      balance.grants.map((g) => [
        cell(pill(g.kind === 'purchased' ? 'Purchased' : 'Promotional', g.kind === 'purchased' ? 'ok' : undefined)),
        cell(`${fmtInt(g.remaining)} (${usd(g.remaining)})`, { className: 'num' }),
        cell(fmtInt(g.credits), { className: 'num' }),
        cell(`${fmtDate(g.expires_at)} (${inDays(g.expires_at)})`),
      ]),
      'No credits. Buy some under Credits.',
    );

    const q = account.quotas;
    const quotas = [
      ['Concurrent sessions', fmtInt(q.concurrent_sessions)],
      ['Sessions per minute, per model', fmtInt(q.sessions_per_minute)],
      ['Maximum session duration', fmtDuration(q.max_session_duration_seconds)],
      ['Monthly billing cap', q.monthly_credit_cap > 0 ? `${fmtInt(q.monthly_credit_cap)} credits (${usd(q.monthly_credit_cap)})` : 'None'],
    ];
    const dl = $('#quotas');
    dl.replaceChildren();
    for (const [term, value] of quotas) {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.textContent = value;
      dl.append(dt, dd);
    }

    fillTable(
      $('#pricing-table'),
      models.models.map((m) => {
        const name = document.createElement('span');
        name.textContent = m.name;
        if (!m.public) name.append(' ', pill('private'));
        return [
          cell(name),
          cell(fmtInt(m.rate.amount_per_sec), { className: 'num' }),
          cell(usd(m.rate.amount_per_sec), { className: 'num' }),
          cell(usd(m.rate.amount_per_sec * 3600), { className: 'num' }),
        ];
      }),
      'No models are available to this account yet.',
    );
    $('#pricing-note').textContent =
      `${fmtInt(creditsPerDollar())} credits per US dollar. Sessions are billed per second from ready until they end.`;
  },

  async usage() {
    const days = Number($('#usage-window').value);
    const since = Date.now() - days * DAY_MS;
    const usage = await api('GET', `/platform/usage?since=${since}`);
    $('#us-seconds').textContent = fmtDuration(usage.total.billed_seconds);
    $('#us-credits').textContent = fmtInt(usage.total.credits);
    $('#us-dollars').textContent = usd(usage.total.credits);
    drawChart($('#usage-chart'), usage.by_day ?? [], since, days);
    fillTable(
      $('#by-day-table'),
      (usage.by_day ?? []).map((d) => [
        cell(d.day),
        cell(fmtInt(d.billed_seconds), { className: 'num' }),
        cell(fmtInt(d.credits), { className: 'num' }),
        cell(usd(d.credits), { className: 'num' }),
      ]),
      'Nothing billed in this period.',
    );
    fillTable(
      $('#by-model-table'),
      (usage.by_model ?? []).map((m) => [
        cell(m.model),
        cell(fmtInt(m.sessions), { className: 'num' }),
        cell(fmtInt(m.billed_seconds), { className: 'num' }),
        cell(fmtInt(m.credits), { className: 'num' }),
        cell(usd(m.credits), { className: 'num' }),
      ]),
      'No sessions in this period.',
    );
    fillTable(
      $('#by-session-table'),
      usage.sessions.map((s) => [
        cell(fmtDateTime(s.created_at)),
        cell(s.model),
        cell(shortId(s.session_id), { className: 'mono', title: s.session_id }),
        cell(pill(s.status, s.status === 'ended' ? undefined : 'ok')),
        cell(fmtInt(s.billed_seconds), { className: 'num' }),
        cell(fmtInt(s.credits), { className: 'num' }),
        cell(usd(s.credits), { className: 'num' }),
      ]),
      'No sessions in this period.',
    );
    $('#usage-truncated').hidden = !usage.truncated;
  },

  async sessions() {
    const { sessions } = await api('GET', '/platform/sessions');
    fillTable(
      $('#sessions-table'),
      sessions.map((s) => {
        const end = button('End', 'danger', async () => {
          if (!confirm(`End session ${shortId(s.session_id)} (${s.model})? Its clients are disconnected and billing stops.`)) return;
          end.disabled = true;
          try {
            const ended = await api('DELETE', `/platform/sessions/${encodeURIComponent(s.session_id)}`);
            say('#sessions-msg', `Session ${shortId(ended.session_id)} ended after ${fmtDuration(ended.billed_seconds)} billed.`, 'ok');
            await LOADERS.sessions();
          } catch (error) {
            end.disabled = false;
            say('#sessions-msg', error.message, 'error');
          }
        });
        end.setAttribute('aria-label', `End session ${shortId(s.session_id)}`);
        return [
          cell(fmtDateTime(s.created_at)),
          cell(s.model),
          cell(shortId(s.session_id), { className: 'mono', title: s.session_id }),
          cell(pill(s.status, s.status === 'ready' ? 'ok' : 'warn')),
          cell(fmtInt(s.billed_seconds), { className: 'num' }),
          cell(fmtInt(s.billed_seconds * s.rate.amount_per_sec), { className: 'num' }),
          cell(end, { className: 'row-actions' }),
        ];
      }),
      'No open sessions.',
    );
  },

  async keys() {
    const { keys } = await api('GET', '/platform/keys');
    fillTable(
      $('#keys-table'),
      keys.map((k) => {
        const name = document.createElement('span');
        name.textContent = k.name ?? '(no name)';
        if (k.current) name.append(' ', pill('signed in with it'));
        const actions = document.createElement('span');
        actions.className = 'actions';
        if (k.status === 'active') {
          const label = k.name ?? k.prefix;
          const rotate = button('Rotate', '', () => rotateKey(k, rotate));
          rotate.setAttribute('aria-label', `Rotate key ${label}`);
          const revoke = button('Revoke', 'danger', () => revokeKey(k, revoke));
          revoke.setAttribute('aria-label', `Revoke key ${label}`);
          actions.append(rotate, revoke);
        }
        return [
          cell(name),
          cell(`${k.prefix}…`, { className: 'mono' }),
          cell(pill(k.status, k.status === 'active' ? 'ok' : undefined)),
          cell(
            k.status === 'revoked' && k.revoked_at ? `${fmtDate(k.created_at)} (revoked ${fmtDate(k.revoked_at)})` : fmtDate(k.created_at),
          ),
          cell(actions, { className: 'row-actions' }),
        ];
      }),
      'No keys.',
    );
  },

  async credits() {
    const account = (state.account = await api('GET', '/platform/account'));
    const payments = account.payment_provider !== null;
    $('#payments-off').hidden = payments;
    $('#payments-on').hidden = !payments;
    const settings = state.pricing.settings;
    $('#buy-dollars').min = String(settings.purchase.min_dollars);
    $('#buy-dollars').max = String(settings.purchase.max_dollars);
    $('#buy-help').textContent =
      `${settings.purchase.min_dollars} to ${fmtInt(settings.purchase.max_dollars)} whole dollars; ${fmtInt(creditsPerDollar())} credits a dollar, valid 365 days.${settings.max_account_credits > 0 ? ` The balance may hold up to ${fmtInt(settings.max_account_credits)} credits.` : ''}`;
    const maxThreshold = settings.auto_topup.max_threshold_credits;
    $('#topup-threshold').max = maxThreshold === undefined ? '' : String(maxThreshold);
    $('#topup-threshold-help').textContent =
      `1 to ${maxThreshold === undefined ? 'any number of' : fmtInt(maxThreshold)} credits. Leave room for the time a payment takes.`;
    $('#topup-amount').min = String(settings.auto_topup.min_dollars);
    $('#topup-amount').max = String(settings.purchase.max_dollars);
    $('#topup-amount-help').textContent =
      `${settings.auto_topup.min_dollars} to ${fmtInt(settings.purchase.max_dollars)} whole dollars each time.`;
    const [topup, purchases] = await Promise.all([api('GET', '/platform/auto-topup'), api('GET', '/platform/purchases?limit=20')]);
    showTopup(topup, true);
    fillTable(
      $('#purchases-table'),
      purchases.purchases.map((p) => {
        const status = document.createElement('span');
        status.append(pill(p.status, p.status === 'confirmed' ? 'ok' : p.status === 'failed' ? 'err' : 'warn'));
        if (p.failure) {
          const why = document.createElement('span');
          why.className = 'failure';
          why.textContent = p.failure;
          status.append(why);
        }
        return [
          cell(fmtDateTime(p.created_at)),
          cell(KINDS[p.kind] ?? p.kind),
          cell(fmtUsd(p.dollars), { className: 'num' }),
          cell(fmtInt(p.credits), { className: 'num' }),
          cell(status),
        ];
      }),
      'No purchases yet.',
    );
  },
};

const KINDS = { manual: 'Purchase', auto_topup: 'Automatic top-up', operator: 'Added by operator' };

function monthStart() {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
}

// ---- chart: credits per UTC day, inline SVG ----

const SVG = 'http://www.w3.org/2000/svg';
function svg(name, attributes, text) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The smallest 1, 2 or 5 × 10^n at or above `value`. */
function niceCeiling(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

let lastChart = null;
window.addEventListener('resize', () => {
  if (lastChart && state.view === 'usage') drawChart(...lastChart);
});

function drawChart(container, byDay, since, days) {
  lastChart = [container, byDay, since, days];
  container.replaceChildren();
  const values = new Map(byDay.map((d) => [d.day, d]));
  const series = [];
  const first = new Date(since);
  for (let i = 0; i <= days; i++) {
    const day = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), first.getUTCDate() + i)).toISOString().slice(0, 10);
    if (day > new Date().toISOString().slice(0, 10)) break;
    series.push({ day, credits: values.get(day)?.credits ?? 0, seconds: values.get(day)?.billed_seconds ?? 0 });
  }
  const highest = Math.max(0, ...series.map((d) => d.credits));
  if (highest === 0) {
    const p = document.createElement('p');
    p.className = 'chart-empty';
    p.textContent = 'Nothing billed in this period.';
    container.append(p);
    return;
  }
  const max = niceCeiling(highest);
  // Drawn at the container's own width, so text stays 11 px on a phone and on a wide screen.
  const width = Math.max(280, Math.round(container.clientWidth || 720));
  const height = width < 500 ? 170 : 220;
  const left = 8 + 7 * fmtInt(max).length;
  const bottom = 24;
  const top = 10;
  const plotW = width - left - 8;
  const plotH = height - bottom - top;
  const total = series.reduce((sum, d) => sum + d.credits, 0);
  const chart = svg('svg', {
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': `Credits per day from ${series[0].day} to ${series.at(-1).day}: ${fmtInt(total)} credits in all, at most ${fmtInt(highest)} in a day.`,
    width,
    height,
  });
  for (const fraction of [0, 0.5, 1]) {
    const y = top + plotH - fraction * plotH;
    chart.append(svg('line', { class: 'grid', x1: left, x2: width - 8, y1: y, y2: y }));
    chart.append(svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, fmtInt(max * fraction)));
  }
  const slot = plotW / series.length;
  const barW = Math.max(2, Math.min(28, slot * 0.7));
  series.forEach((d, i) => {
    if (d.credits === 0) return;
    const h = Math.max(1, (d.credits / max) * plotH);
    const x = left + i * slot + (slot - barW) / 2;
    const bar = svg('rect', { class: 'bar', x, y: top + plotH - h, width: barW, height: h, rx: 2 });
    bar.append(svg('title', {}, `${d.day}: ${fmtInt(d.credits)} credits (${usd(d.credits)}), ${fmtInt(d.seconds)} s`));
    chart.append(bar);
  });
  const labelEvery = Math.ceil(series.length / (width < 500 ? 4 : 7));
  series.forEach((d, i) => {
    if (i % labelEvery !== 0 && i !== series.length - 1) return;
    if (i !== series.length - 1 && series.length - 1 - i < labelEvery / 2) return;
    // The first and last labels are anchored inside the drawing, so neither is cut at an edge.
    const edge = i === 0 ? 'start' : i === series.length - 1 ? 'end' : 'middle';
    const x = edge === 'start' ? left : edge === 'end' ? width - 8 : left + i * slot + slot / 2;
    chart.append(svg('text', { x, y: height - 6, 'text-anchor': edge }, d.day.slice(5)));
  });
  container.append(chart);
}

$('#usage-window').addEventListener('change', () => void load('usage'));

// ---- keys ----

function revealSecret(key, what) {
  $('#secret-value').value = key;
  $('#secret-box').hidden = false;
  $('#secret-title').textContent = what;
  $('#secret-title').focus();
}

$('#secret-copy').addEventListener('click', async () => {
  const input = $('#secret-value');
  try {
    await navigator.clipboard.writeText(input.value);
    say('#key-msg', 'Copied to the clipboard.', 'ok');
  } catch {
    input.select();
    say('#key-msg', 'Select the key and copy it (the clipboard is not available here).', 'error');
  }
});

$('#secret-done').addEventListener('click', () => {
  $('#secret-value').value = '';
  $('#secret-box').hidden = true;
  $('#key-name').focus();
});

$('#key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  void submitting(form, '#key-msg', async () => {
    const name = $('#key-name').value.trim();
    const created = await api('POST', '/platform/keys', name ? { name } : {});
    $('#key-name').value = '';
    say('#key-msg', `Key ${created.name ?? created.prefix} created.`, 'ok');
    revealSecret(created.key, 'Your new API key');
    await LOADERS.keys();
  });
});

async function rotateKey(key, control) {
  if (
    !confirm(
      `Rotate key ${key.name ?? key.prefix}? It stops working now and a new key replaces it; tokens it minted live until they expire.`,
    )
  )
    return;
  control.disabled = true;
  try {
    const rotated = await api('POST', `/platform/keys/${encodeURIComponent(key.id)}/rotate`);
    say('#key-msg', `Key ${key.name ?? key.prefix} rotated: ${rotated.prefix}… replaces it.`, 'ok');
    revealSecret(rotated.key, 'The rotated key');
    await LOADERS.keys();
  } catch (error) {
    control.disabled = false;
    say('#key-msg', error.message, 'error');
  }
}

async function revokeKey(key, control) {
  const warning = key.current ? ' You signed in with this key: revoking it also signs you out.' : '';
  if (!confirm(`Revoke key ${key.name ?? key.prefix}? It and every token it minted stop working at once.${warning}`)) return;
  control.disabled = true;
  try {
    await api('DELETE', `/platform/keys/${encodeURIComponent(key.id)}`);
    say('#key-msg', `Key ${key.name ?? key.prefix} revoked.`, 'ok');
    await LOADERS.keys();
  } catch (error) {
    control.disabled = false;
    if (error.status !== 401) say('#key-msg', error.message, 'error');
  }
}

// ---- credits ----

function showTopup(topup, fill) {
  const line = $('#topup-state');
  const status = document.createElement('span');
  const strong = document.createElement('strong');
  strong.textContent = topup.enabled ? 'On' : 'Off';
  status.append(strong);
  if (topup.enabled) {
    status.append(
      `: when the balance falls below ${fmtInt(topup.threshold_credits)} credits, buy ${fmtUsd(topup.amount_dollars)}. `,
      topup.armed ? 'Ready to top up.' : 'It tops up again once the balance is back above the threshold.',
    );
  }
  line.replaceChildren(status);
  const last = topup.last_topup;
  if (last) {
    const outcome = last.status === 'failed' ? `failed (${last.failure})` : last.status;
    const previous = document.createElement('span');
    previous.textContent = `Last top-up: ${fmtUsd(last.dollars)} on ${fmtDateTime(last.created_at)}, ${outcome}.`;
    line.append(previous);
  }
  line.dataset.enabled = String(topup.enabled);
  if (fill) {
    $('#topup-threshold').value = topup.threshold_credits === null ? '' : String(topup.threshold_credits);
    $('#topup-amount').value = topup.amount_dollars === null ? '' : String(topup.amount_dollars);
  }
  $('#topup-off').disabled = !topup.enabled;
}

$('#buy-dollars').addEventListener('input', () => {
  const text = $('#buy-dollars').value.trim();
  $('#buy-form button[type="submit"]').textContent =
    /^\d{1,4}$/.test(text) && Number(text) > 0 ? `Buy ${fmtInt(Number(text) * creditsPerDollar())} credits` : 'Buy';
});

$('#buy-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  void submitting(form, '#buy-msg', async () => {
    const dollars = wholeNumber(form, 'dollars', 'The amount');
    // One key per submission: a retried request (a dropped answer) cannot buy twice.
    const purchase = await api('POST', '/platform/purchases', { dollars }, { 'Idempotency-Key': crypto.randomUUID() });
    if (purchase.status === 'confirmed')
      say('#buy-msg', `Bought ${fmtInt(purchase.credits)} credits for ${fmtUsd(purchase.dollars)}.`, 'ok');
    else
      say(
        '#buy-msg',
        `Payment pending${purchase.checkout_url ? ': complete it at the provider' : ''}; the credits arrive once it is confirmed.`,
        'ok',
      );
    form.reset();
    form.querySelector('button[type="submit"]').textContent = 'Buy';
    await LOADERS.credits();
  });
});

$('#topup-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  void submitting(form, '#topup-msg', async () => {
    const threshold = wholeNumber(form, 'threshold_credits', 'The threshold');
    const amount = wholeNumber(form, 'amount_dollars', 'The amount');
    const topup = await api('PUT', '/platform/auto-topup', { threshold_credits: threshold, amount_dollars: amount });
    showTopup(topup, true);
    say('#topup-msg', 'Automatic top-up saved.', 'ok');
  });
});

$('#topup-off').addEventListener('click', async () => {
  const form = $('#topup-form');
  clearInvalid(form);
  try {
    const topup = await api('DELETE', '/platform/auto-topup');
    showTopup(topup, true);
    say('#topup-msg', 'Automatic top-up turned off.', 'ok');
  } catch (error) {
    say('#topup-msg', error.message, 'error');
  }
});

// ---- start ----

for (const table of document.querySelectorAll('table')) table.classList.add('stack');

async function start() {
  if (!takeLinkToken()) {
    try {
      const session = await api('GET', '/platform/dashboard/session');
      await signedIn(session);
      return;
    } catch {
      // Not signed in.
    }
  }
  signedOut();
  (state.linkToken === null ? $('#api-key') : $('#link-form button')).focus();
}

void start();
