// The settings page: reads and writes the bridge's JSON settings endpoints on the same origin.
// Secrets never leave page memory: the bearer token lives in `state.token` only (no storage, no
// cookies), and the API key field is write-only (the bridge only says whether one is configured).
'use strict';

(() => {
  const PROFILES = {
    hermes: {label: 'Hermes', model: 'hermes-agent'},
    deepagents: {label: 'DeepAgents', model: 'deepagents-local'},
    generic: {label: 'Generic OpenAI-compatible', model: 'local-model'},
  };
  const FIRST_SOURCE = {id: 'local-wiki', name: 'Local Wiki', protocol: 'llmwiki-http',
    url: 'http://127.0.0.1:8765', selected: true};
  const KEPT_SOURCE_FIELDS = ['description', 'capabilities', 'adapter', 'implementation', 'bundleId',
    'pageCount', 'approvedPageCount', 'root', 'rootLabel', 'status'];

  const state = {
    token: null,          // the bridge bearer token, when the bridge asked for one
    settings: null,       // the last GET /settings.json document
    health: null,         // the last GET /health?probe=1 document (the runtime checked live)
    lastProbes: new Map(),  // source id -> health of its last live test (GET /sources lastProbe)
    saved: [],            // the registered sources, as last read or saved
    rows: [],             // the source rows being edited
    nextKey: 1,
    showRequired: false,  // "URL is required" errors appear only after a save attempt
    loaded: {runtime: {}, advanced: {}},  // form values as loaded, to send only what changed
  };

  const $ = (id) => document.getElementById(id);

  class BridgeError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = {Accept: 'application/json'};
    const init = {method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error'};
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    if (state.token !== null) {
      headers.Authorization = `Bearer ${state.token}`;
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (_) {
      throw new BridgeError(0, 'network_error',
        'The bridge could not be reached. Check that it is still running.');
    }
    let payload = null;
    try {
      payload = await response.json();
    } catch (_) {
      payload = null;
    }
    if (!response.ok) {
      const error = payload && typeof payload.error === 'object' && payload.error ? payload.error : {};
      throw new BridgeError(response.status, String(error.code || `http_${response.status}`),
        String(error.message || `The bridge answered with HTTP ${response.status}.`));
    }
    return payload;
  }

  // ------------------------------------------------------------------ messages

  let alertTimer = 0;

  function showError(message) {
    const alert = $('alert');
    window.clearTimeout(alertTimer);
    alert.textContent = '';
    // Set after a tick, so screen readers announce a repeated message again.
    alertTimer = window.setTimeout(() => { alert.textContent = message; }, 0);
    $('status').textContent = '';
  }

  function clearError() {
    window.clearTimeout(alertTimer);
    $('alert').textContent = '';
  }

  function announce(message) {
    clearError();
    $('status').textContent = message;
  }

  function describeError(context, error) {
    const code = error.code && error.code !== 'network_error' ? ` (${error.code})` : '';
    return `${context}: ${error.message}${code}`;
  }

  function handleError(context, error) {
    if (error.status === 401) {
      showLocked('The bridge asked for its bearer token. Enter it to continue.');
      return;
    }
    showError(describeError(context, error));
  }

  async function whileBusy(button, work) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await work();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  // ------------------------------------------------------------------ lock and load

  function showLocked(message) {
    state.token = null;
    $('loading').hidden = true;
    $('unlocked').hidden = true;
    $('reload-overview').hidden = true;
    $('token-section').hidden = false;
    if (message) {
      showError(message);
    }
    $('token-input').focus();
  }

  function showUnlocked() {
    $('loading').hidden = true;
    $('token-section').hidden = true;
    $('reload-overview').hidden = false;
    $('unlocked').hidden = false;
  }

  async function loadAll() {
    const settings = await api('GET', '/settings.json');
    const registry = await api('GET', '/settings/sources.json');
    applySettings(settings);
    applySources(Array.isArray(registry.sources) ? registry.sources : []);
    renderOverview();
    showUnlocked();
    await refreshStatus();
  }

  // The live part of the overview: the runtime probed now, each source's last test. A failure
  // here leaves the rest of the page usable, so it is reported in the overview, not as an alert.
  async function refreshStatus() {
    try {
      state.health = await api('GET', '/health?probe=1');
    } catch (error) {
      state.health = {status: 'unknown', error: `${error.message}${error.code ? ` (${error.code})` : ''}`};
    }
    await refreshLastProbes();
    renderOverview();
  }

  async function refreshLastProbes() {
    try {
      const view = await api('GET', '/sources');
      state.lastProbes = new Map((view.sources || []).filter((entry) => entry.lastProbe)
        .map((entry) => [entry.id, entry.lastProbe]));
    } catch (_) {
      state.lastProbes = new Map();  // the overview then says the sources were not tested
    }
  }

  async function start() {
    try {
      await loadAll();
    } catch (error) {
      if (error.status === 401) {
        showLocked(null);
        return;
      }
      $('loading').hidden = true;
      showError(describeError('The settings could not be loaded', error));
    }
  }

  async function onTokenSubmit(event) {
    event.preventDefault();
    const input = $('token-input');
    const tokenError = $('token-error');
    if (!input.value) {
      tokenError.textContent = 'Enter the bridge bearer token.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    state.token = input.value;
    await whileBusy($('token-submit'), async () => {
      try {
        await loadAll();
        input.value = '';
        input.removeAttribute('aria-invalid');
        tokenError.textContent = '';
        announce('Unlocked. The token is kept in this page only until you reload it.');
        $('overview-title').focus();
      } catch (error) {
        state.token = null;
        if (error.status === 401) {
          input.setAttribute('aria-invalid', 'true');
          tokenError.textContent = 'That token was not accepted.';
          showError('That bearer token was not accepted. Check it and try again.');
          input.select();
          return;
        }
        showError(describeError('The settings could not be loaded', error));
      }
    });
  }

  // ------------------------------------------------------------------ overview

  function plural(count, one, many) {
    return `${count} ${count === 1 ? one : many}`;
  }

  function renderOverview() {
    const settings = state.settings;
    if (!settings) {
      return;
    }
    const connection = settings.runtimeConnection || {};
    const runtime = settings.runtime || {};
    const network = settings.network || {};
    const policy = settings.sourcePolicy || {};
    const persistence = settings.persistence || {};
    const profile = PROFILES[runtime.profile] ? PROFILES[runtime.profile].label : runtime.profile;
    const model = connection.model ? `model ${connection.model}` : (connection.modelConfigured
      ? 'model set' : 'no model');
    const key = connection.apiKeyConfigured ? 'API key saved' : 'no API key';
    $('metric-runtime').textContent = `${profile}: ${model}, ${key}`;
    const runtimeState = runtimeStatus();
    $('metric-runtime-status').textContent = runtimeState.text;
    $('metric-runtime-status').className = `metric-status ${runtimeState.ok ? 'status-ok' : 'status-problem'}`;

    const selected = state.saved.filter((source) => source.selected !== false).length;
    $('metric-sources').textContent =
      `${plural(state.saved.length, 'registered', 'registered')}, ${selected} selected`;
    const sourcesState = sourcesStatus();
    $('metric-sources-status').textContent = sourcesState.text;
    $('metric-sources-status').className = `metric-status ${sourcesState.ok ? 'status-ok' : 'status-problem'}`;

    const auth = settings.bridgeAuth && settings.bridgeAuth.bearerTokenConfigured
      ? 'Bearer token required' : 'No bearer token';
    const origins = plural(network.configuredAllowedOrigins || 0, 'extra origin', 'extra origins');
    $('metric-access').textContent = `${auth}; ${network.host}:${network.port}; ${origins}`;

    $('metric-policy').textContent = `${policy.policy}; ${plural(
      policy.configuredAllowedSourceOrigins || 0, 'allowed origin', 'allowed origins')}`;

    const hero = $('overview-hero');
    if (selected > 0 && evidenceOnly()) {
      hero.textContent = 'Bridge is ready: it answers evidence-only, so no model is needed. Run the '
        + 'setup check in step 3.';
      hero.className = 'hero hero-ready';
    } else if (selected > 0 && !runtimeState.ok && runtimeState.checked) {
      hero.textContent = `The runtime is not usable (${runtimeState.text}): runtime-backed answers will `
        + 'fail until step 1 is fixed. Evidence-only checks in step 3 work now.';
      hero.className = 'hero hero-todo';
    } else if (selected > 0) {
      hero.textContent = 'Bridge is ready for local verification: run the setup check in step 3.';
      hero.className = 'hero hero-ready';
    } else {
      hero.textContent = 'Next: register and select at least one Knowledge Source in step 2.';
      hero.className = 'hero hero-todo';
    }
    let persistenceText = '';
    if (persistence.enabled === false) {
      persistenceText = 'This bridge runs without a settings file, so changes cannot be saved from this page.';
    } else if (persistence.fileStatus === 'invalid') {
      persistenceText = 'The settings file could not be read. The bridge will not overwrite it: fix or '
        + 'remove it, then save again.';
    } else if (persistence.fileStatus === 'invalid_sources') {
      persistenceText = 'The sources in the settings file are invalid and were not loaded. Saving sources '
        + 'here replaces them.';
    }
    const note = $('persistence-note');
    note.hidden = persistenceText === '';
    note.textContent = persistenceText;
  }

  function humanize(reason) {
    return String(reason || 'unknown').replace(/_/g, ' ');
  }

  // Whether requests that name no mode are answered without a model (the demo's setting).
  function evidenceOnly() {
    const orchestration = (state.settings || {}).orchestration || {};
    return orchestration.defaultMode === 'evidence-only';
  }

  // What /health?probe=1 found: checked says whether the runtime was reached for at all. When
  // the bridge answers evidence-only, an unreachable runtime is no problem, only a note.
  function runtimeStatus() {
    const found = probedRuntime();
    if (!evidenceOnly()) {
      return found;
    }
    const note = found.ok ? '' : ' Requests that ask for delegated-runtime or hybrid need the runtime '
      + 'of step 1.';
    return {ok: true, checked: found.checked, text: `evidence-only: no model needed.${note}`};
  }

  function probedRuntime() {
    const health = state.health;
    if (!health) {
      return {ok: false, checked: false, text: 'Checking the runtime…'};
    }
    if (health.error) {
      return {ok: false, checked: false, text: `Runtime not checked: ${health.error}`};
    }
    const reach = (health.runtimeConnection || {}).reachability || {};
    if (!reach.checked) {
      return {ok: true, checked: false, text: reach.basis === 'adapter_not_probeable'
        ? `Not checked: the ${health.runtimeAdapter} adapter cannot be probed; run a check in step 3.`
        : 'Not checked.'};
    }
    if (reach.ok) {
      return {ok: true, checked: true, text: `Reachable (HTTP ${reach.httpStatus}).`};
    }
    if (reach.reachable) {
      return {ok: false, checked: true, text: `Reachable, but it answered HTTP ${reach.httpStatus}; `
        + 'check the API key and base URL.'};
    }
    return {ok: false, checked: true, text: `Unreachable: ${humanize(reach.reason)}.`};
  }

  function sourcesStatus() {
    const tested = state.saved.map((source) => state.lastProbes.get(source.id)).filter(Boolean);
    if (tested.length === 0) {
      return {ok: true, text: state.saved.length ? 'Not tested yet: use Test in step 2.' : ''};
    }
    const failed = tested.filter((health) => !health.ok).length;
    const text = `Last test: ${tested.length - failed} reachable, ${failed} not reachable`
      + (tested.length < state.saved.length ? `, ${state.saved.length - tested.length} not tested.` : '.');
    return {ok: failed === 0, text};
  }

  async function onReloadOverview() {
    await whileBusy($('reload-overview'), async () => {
      try {
        const settings = await api('GET', '/settings.json');
        const registry = await api('GET', '/settings/sources.json');
        state.settings = settings;
        state.saved = Array.isArray(registry.sources) ? registry.sources : [];
        renderOverview();
        await refreshStatus();
        announce('Overview reloaded.');
      } catch (error) {
        handleError('The overview could not be reloaded', error);
      }
    });
  }

  // ------------------------------------------------------------------ settings forms

  function originLines(origins) {
    return (origins || []).map((origin) => String(origin).replace(/^([a-z][a-z0-9+.-]*:\/\/[^/]+)\/$/i, '$1'))
      .join('\n');
  }

  function originList(text) {
    return text.split(/[\s,]+/).map((item) => item.trim()).filter((item) => item !== '');
  }

  function applySettings(settings, {keepNetwork = false} = {}) {
    state.settings = settings;
    const connection = settings.runtimeConnection || {};
    const runtime = settings.runtime || {};
    const network = settings.network || {};
    const policy = settings.sourcePolicy || {};
    const tokenConfigured = Boolean(settings.bridgeAuth && settings.bridgeAuth.bearerTokenConfigured);

    const baseUrl = connection.baseUrl && connection.baseUrl !== '[invalid-url]' ? connection.baseUrl : '';
    $('runtime-profile').value = runtime.profile || 'hermes';
    $('runtime-base-url').value = baseUrl;
    $('runtime-model').value = connection.model || '';
    $('runtime-api-key').value = '';
    $('runtime-api-key-clear').checked = false;
    $('runtime-api-key-clear-field').hidden = !connection.apiKeyConfigured;
    $('runtime-api-key-help').textContent = connection.apiKeyConfigured
      ? 'An API key is saved. It is never shown; leave this blank to keep it.'
      : 'No API key is saved. Leave blank if the runtime needs none.';
    state.loaded.runtime = {profile: $('runtime-profile').value, baseUrl, model: $('runtime-model').value};

    const advanced = state.loaded.advanced;
    if (!keepNetwork) {
      $('advanced-host').value = network.host || '';
      $('advanced-port').value = network.port === undefined ? '' : String(network.port);
    }
    advanced.host = $('advanced-host').value;
    advanced.port = $('advanced-port').value;
    $('advanced-allow-public-bind').checked = Boolean(network.allowPublicBind);
    $('advanced-allow-insecure-public-bind').checked = Boolean(network.allowInsecurePublicBind);
    $('advanced-bearer-token').value = '';
    $('advanced-bearer-token-clear').checked = false;
    $('advanced-bearer-token-clear-field').hidden = !tokenConfigured;
    $('advanced-bearer-token-help').textContent = tokenConfigured
      ? 'A bearer token is set. It is never shown; type a new one to replace it.'
      : 'No bearer token is set: anyone who can reach the bridge can use it.';
    $('advanced-allowed-origins').value = originLines(network.allowedOrigins);
    $('advanced-timeout').value = String(connection.requestTimeoutMs || '');
    $('advanced-fanout').value = String(policy.fanoutConcurrency || '');
    $('advanced-source-policy').value = policy.policy || 'private-http';
    $('advanced-source-origins').value = originLines(policy.allowedSourceOrigins);
    const logs = settings.observability || {};
    $('advanced-audit-log').checked = Boolean(logs.auditLog);
    $('advanced-io-log').value = logs.ioLogMode || 'off';
    $('advanced-io-log-path-help').textContent = (logs.ioLogPathConfigured
      ? 'The file the operator set (not shown).'
      : 'Default: .runtime-logs/llmwiki-agent-bridge-io.jsonl in the bridge\'s working directory.')
      + ' Another file is chosen where the bridge starts: --io-log-path or LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH.';
    Object.assign(advanced, {
      auditLog: $('advanced-audit-log').checked,
      ioLogMode: $('advanced-io-log').value,
      allowPublicBind: $('advanced-allow-public-bind').checked,
      allowInsecurePublicBind: $('advanced-allow-insecure-public-bind').checked,
      allowedOrigins: $('advanced-allowed-origins').value,
      requestTimeoutMs: $('advanced-timeout').value,
      fanoutConcurrency: $('advanced-fanout').value,
      sourcePolicy: $('advanced-source-policy').value,
      allowedSourceOrigins: $('advanced-source-origins').value,
    });
  }

  function onProfileChange() {
    const model = $('runtime-model');
    const defaults = Object.values(PROFILES).map((profile) => profile.model);
    if (model.value.trim() === '' || defaults.includes(model.value.trim())) {
      model.value = PROFILES[$('runtime-profile').value].model;
    }
  }

  function numberOrText(value) {
    const text = value.trim();
    return /^\d+$/.test(text) ? Number(text) : text;
  }

  async function saveConfig(button, patch, context) {
    let result = null;
    await whileBusy(button, async () => {
      try {
        result = await api('PUT', '/settings/config.json', patch);
      } catch (error) {
        handleError(context, error);
      }
    });
    return result;
  }

  async function onRuntimeSubmit(event) {
    event.preventDefault();
    const loaded = state.loaded.runtime;
    const patch = {};
    const profile = $('runtime-profile').value;
    const baseUrl = $('runtime-base-url').value.trim();
    const model = $('runtime-model').value.trim();
    const apiKey = $('runtime-api-key').value;
    if (profile !== loaded.profile) {
      patch.runtimeProfile = profile;
    }
    if (baseUrl !== loaded.baseUrl) {
      if (!/^https?:\/\/\S+$/i.test(baseUrl)) {
        showError('Enter the runtime base URL as an absolute http:// or https:// URL.');
        $('runtime-base-url').focus();
        return;
      }
      patch.baseUrl = baseUrl;
    }
    if (model !== loaded.model) {
      if (model === '') {
        showError('Enter the model name the runtime expects.');
        $('runtime-model').focus();
        return;
      }
      patch.model = model;
    }
    if ($('runtime-api-key-clear').checked) {
      patch.apiKey = '';
    } else if (apiKey !== '') {
      patch.apiKey = apiKey;
    }
    if (Object.keys(patch).length === 0) {
      announce('Nothing to save: the runtime settings are unchanged.');
      return;
    }
    const result = await saveConfig($('runtime-save'), patch, 'The runtime settings were not saved');
    if (result) {
      applySettings(result.settings, {keepNetwork: true});
      renderOverview();
      announce('Runtime saved. It applies to the next run.');
      await refreshStatus();
    }
  }

  async function onAdvancedSubmit(event) {
    event.preventDefault();
    const loaded = state.loaded.advanced;
    const patch = {};
    const current = {
      host: $('advanced-host').value.trim(),
      port: $('advanced-port').value.trim(),
      allowPublicBind: $('advanced-allow-public-bind').checked,
      allowInsecurePublicBind: $('advanced-allow-insecure-public-bind').checked,
      allowedOrigins: $('advanced-allowed-origins').value,
      requestTimeoutMs: $('advanced-timeout').value.trim(),
      fanoutConcurrency: $('advanced-fanout').value.trim(),
      sourcePolicy: $('advanced-source-policy').value,
      allowedSourceOrigins: $('advanced-source-origins').value,
      auditLog: $('advanced-audit-log').checked,
      ioLogMode: $('advanced-io-log').value,
    };
    for (const [name, value] of Object.entries(current)) {
      if (value === loaded[name] || (typeof value === 'string' && value === String(loaded[name]).trim())) {
        continue;
      }
      if (name === 'allowedOrigins' || name === 'allowedSourceOrigins') {
        patch[name] = originList(value);
      } else if (name === 'port' || name === 'requestTimeoutMs' || name === 'fanoutConcurrency') {
        patch[name] = numberOrText(value);
      } else {
        patch[name] = value;
      }
    }
    const token = $('advanced-bearer-token').value;
    if ($('advanced-bearer-token-clear').checked) {
      patch.bridgeBearerToken = '';
    } else if (token !== '') {
      patch.bridgeBearerToken = token;
    }
    if (Object.keys(patch).length === 0) {
      announce('Nothing to save: the advanced settings are unchanged.');
      return;
    }
    const result = await saveConfig($('advanced-save'), patch, 'The advanced settings were not saved');
    if (!result) {
      return;
    }
    if ('bridgeBearerToken' in patch) {
      // The new token guards the next request; keep using the bridge with it.
      state.token = patch.bridgeBearerToken === '' ? null : patch.bridgeBearerToken;
    }
    applySettings(result.settings, {keepNetwork: true});
    renderOverview();
    const restart = Array.isArray(result.restartRequired) ? result.restartRequired : [];
    const notice = $('restart-notice');
    notice.hidden = restart.length === 0;
    notice.textContent = restart.length === 0 ? ''
      : `Restart required: the new ${restart.join(' and ')} ${restart.length > 1 ? 'take' : 'takes'} effect `
        + 'after the bridge restarts.';
    announce(restart.length === 0 ? 'Advanced settings saved and applied.'
      : 'Advanced settings saved. Restart the bridge to apply the network change.');
  }

  // ------------------------------------------------------------------ sources

  function rowFrom(source) {
    return {
      key: state.nextKey++,
      id: source ? String(source.id || '') : '',
      name: source ? String(source.name || '') : '',
      protocol: source && source.protocol ? String(source.protocol) : 'llmwiki-http',
      url: source ? String(source.url || '') : '',
      selected: source ? source.selected !== false : true,
      original: source || null,
    };
  }

  function applySources(sources) {
    state.saved = sources;
    state.showRequired = false;
    state.rows = sources.map((source) => rowFrom(source));
    if (state.rows.length === 0) {
      const first = rowFrom(null);
      Object.assign(first, FIRST_SOURCE);
      state.rows.push(first);
    }
    renderRows();
  }

  function isBlank(row) {
    return row.id.trim() === '' && row.name.trim() === '' && row.url.trim() === '';
  }

  function isChanged(row) {
    const original = row.original;
    return !original || row.id !== String(original.id || '') || row.name !== String(original.name || '')
      || row.protocol !== original.protocol || row.url !== String(original.url || '')
      || row.selected !== (original.selected !== false);
  }

  function effectiveId(row, index) {
    return row.id.trim() || `source-${index + 1}`;
  }

  function rowElement(row, index) {
    const node = $('source-row-template').content.firstElementChild.cloneNode(true);
    const prefix = `source-${row.key}`;
    const number = index + 1;
    node.dataset.key = String(row.key);
    node.querySelector('.source-legend').textContent = `Source ${number}`;
    for (const label of node.querySelectorAll('label[data-for]')) {
      label.htmlFor = `${prefix}-${label.dataset.for}`;
    }
    for (const message of node.querySelectorAll('[data-error]')) {
      message.id = `${prefix}-${message.dataset.error}-error`;
    }
    for (const input of node.querySelectorAll('[data-field]')) {
      const field = input.dataset.field;
      input.id = `${prefix}-${field}`;
      if (input.type === 'checkbox') {
        input.checked = row.selected;
      } else {
        input.value = row[field];
      }
      if (field === 'id' || field === 'url') {
        input.setAttribute('aria-describedby', `${prefix}-${field}-error`);
      }
      if (field === 'id') {
        input.placeholder = `source-${number}`;
      }
      const update = () => {
        row[field] = input.type === 'checkbox' ? input.checked : input.value;
        validateRows();
        updateSourcesSummary();
      };
      input.addEventListener(input.tagName === 'SELECT' || input.type === 'checkbox' ? 'change' : 'input',
        update);
    }
    const probe = node.querySelector('[data-probe]');
    probe.id = `${prefix}-probe`;
    const test = node.querySelector('[data-action="test"]');
    test.id = `${prefix}-test`;
    test.setAttribute('aria-label', `Test source ${number}`);
    test.addEventListener('click', () => testSource(row, test, probe));
    const remove = node.querySelector('[data-action="remove"]');
    remove.id = `${prefix}-remove`;
    remove.setAttribute('aria-label', `Remove source ${number}`);
    remove.addEventListener('click', () => removeRow(row));
    return node;
  }

  function renderRows() {
    const list = $('source-rows');
    list.replaceChildren(...state.rows.map((row, index) => rowElement(row, index)));
    $('sources-empty').hidden = state.rows.length !== 0;
    validateRows();
    updateSourcesSummary();
  }

  function setFieldError(row, field, message) {
    const input = $(`source-${row.key}-${field}`);
    const error = $(`source-${row.key}-${field}-error`);
    if (!input || !error) {
      return;
    }
    error.textContent = message;
    if (message) {
      input.setAttribute('aria-invalid', 'true');
    } else {
      input.removeAttribute('aria-invalid');
    }
  }

  // Checked as the operator types; the bridge checks again on save and has the last word.
  function validateRows() {
    const positions = new Map();
    state.rows.forEach((row, index) => {
      if (isBlank(row)) {
        return;
      }
      const id = effectiveId(row, index);
      positions.set(id, [...(positions.get(id) || []), index + 1]);
    });
    const problems = [];
    state.rows.forEach((row, index) => {
      if (isBlank(row)) {
        setFieldError(row, 'id', '');
        setFieldError(row, 'url', '');
        return;
      }
      const id = effectiveId(row, index);
      const others = (positions.get(id) || []).filter((position) => position !== index + 1);
      setFieldError(row, 'id', others.length
        ? `Source ids must be unique: source ${others.join(', ')} also uses "${id}".` : '');
      const url = row.url.trim();
      let urlError = '';
      if (url === '' && state.showRequired) {
        urlError = 'Enter the URL of the Knowledge Source.';
      } else if (url !== '' && !/^https?:\/\/[^\s/?#]+/i.test(url)) {
        urlError = 'Use an absolute http:// or https:// URL.';
      }
      setFieldError(row, 'url', urlError);
    });
    for (const [id, where] of positions) {
      if (where.length > 1) {
        problems.push(`Duplicate source id "${id}" (sources ${where.join(' and ')}).`);
      }
    }
    const summary = problems.join(' ');
    if ($('sources-problems').textContent !== summary) {
      $('sources-problems').textContent = summary;
    }
  }

  function updateSourcesSummary() {
    const unsaved = state.rows.length !== state.saved.length || state.rows.some((row) => isChanged(row));
    const count = plural(state.saved.length, 'source is', 'sources are');
    $('sources-summary').textContent = `${count} registered.${unsaved ? ' You have unsaved changes.' : ''}`;
  }

  function onAddSource() {
    const row = rowFrom(null);
    state.rows.push(row);
    renderRows();
    $(`source-${row.key}-id`).focus();
    $('status').textContent = `Added source ${state.rows.length}. Fill it in, then save.`;
  }

  function removeRow(row) {
    const index = state.rows.indexOf(row);
    if (index < 0) {
      return;
    }
    state.rows.splice(index, 1);
    renderRows();
    const next = state.rows[Math.min(index, state.rows.length - 1)];
    (next ? $(`source-${next.key}-id`) : $('source-add')).focus();
    $('status').textContent = `Removed source ${index + 1}. Save sources to apply.`;
  }

  function descriptorFrom(row) {
    const descriptor = {};
    const original = row.original;
    if (original) {
      for (const field of KEPT_SOURCE_FIELDS) {
        if (original[field] !== undefined && original[field] !== '') {
          descriptor[field] = original[field];
        }
      }
      if (original.title && original.title !== original.name && row.name === original.name) {
        descriptor.title = original.title;
      }
    }
    if (row.id.trim() !== '') {
      descriptor.id = row.id.trim();
    }
    if (row.name.trim() !== '') {
      descriptor.name = row.name.trim();
    }
    descriptor.protocol = row.protocol;
    descriptor.url = row.url.trim();
    descriptor.selected = row.selected;
    descriptor.status = descriptor.status || 'ready';
    return descriptor;
  }

  async function onSourcesSubmit(event) {
    event.preventDefault();
    state.showRequired = true;
    validateRows();
    const sources = state.rows.filter((row) => !isBlank(row)).map((row) => descriptorFrom(row));
    await whileBusy($('sources-save'), async () => {
      try {
        const result = await api('PUT', '/settings/sources.json', {sources});
        applySources(Array.isArray(result.sources) ? result.sources : []);
        announce(`Saved ${plural(state.saved.length, 'Knowledge Source', 'Knowledge Sources')}.`);
        await refreshLastProbes();  // a row tested before saving keeps its result
        renderOverview();
      } catch (error) {
        handleError('The sources were not saved', error);
      }
    });
  }

  function onDiscardSources() {
    applySources(state.saved);
    announce('Source changes discarded.');
  }

  function probeText(entry) {
    const health = entry.health || {};
    if (health.basis !== 'live_probe') {
      const why = health.reason === 'source_policy_blocked'
        ? 'the bridge\'s source policy does not allow this URL (see Advanced settings)'
        : humanize(health.reason || 'not probed');
      return {ok: false, text: `Not tested: ${why}.`};
    }
    if (health.ok) {
      const details = [`read ${health.endpoint || 'the source'}`];
      if (typeof entry.pageCount === 'number') {
        details.push(plural(entry.pageCount, 'page', 'pages'));
      }
      if (entry.bundleId) {
        details.push(`bundle ${entry.bundleId}`);
      }
      return {ok: true, text: `Reachable: ${details.join(', ')}.`};
    }
    const facts = [];
    if (health.httpStatus) {
      facts.push(`HTTP ${health.httpStatus}`);
    }
    if (health.timeout) {
      facts.push('timed out');
    }
    const what = facts.length ? ` (${facts.join(', ')})` : '';
    const why = health.message ? String(health.message) : humanize(health.reason);
    const retry = health.retryable ? ' Check that it is running, then test again.' : '';
    return {ok: false, text: `Not reachable${what}: ${why}${retry}`};
  }

  // Tests the row as it is typed (saved or not): the bridge probes it under its source policy.
  async function testSource(row, button, probe) {
    if (row.url.trim() === '') {
      probe.className = 'probe probe-failed';
      probe.textContent = 'Enter the URL of the Knowledge Source first.';
      return;
    }
    probe.className = 'probe probe-pending';
    probe.textContent = 'Testing…';
    await whileBusy(button, async () => {
      try {
        const answer = await api('POST', '/sources/probe', {source: descriptorFrom(row)});
        const outcome = probeText(answer.source || {});
        probe.className = `probe ${outcome.ok ? 'probe-ok' : 'probe-failed'}`;
        probe.textContent = outcome.text;
        await refreshLastProbes();
        renderOverview();
      } catch (error) {
        probe.className = 'probe probe-failed';
        probe.textContent = `The test could not run: ${error.message}${error.code ? ` (${error.code})` : ''}`;
        if (error.status === 401) {
          handleError('The source test failed', error);
        }
      }
    });
  }

  // ------------------------------------------------------------------ verification

  function resultOf(task) {
    for (const artifact of (task && task.artifacts) || []) {
      for (const part of artifact.parts || []) {
        if (part && part.data && typeof part.data === 'object') {
          return part.data;
        }
      }
    }
    return null;
  }

  function listItem(parts) {
    const item = document.createElement('li');
    for (const [className, text] of parts) {
      if (!text) {
        continue;
      }
      const span = document.createElement('span');
      span.className = className;
      span.textContent = text;
      item.append(span, ' ');
    }
    return item;
  }

  // ------------------------------------------------------------------ answer Markdown
  // The answer is Markdown from a model or a source, so it is untrusted: it is turned into DOM
  // nodes whose text is only ever set as text (never parsed as HTML), links go only to http(s)
  // URLs or to this page's citation list, and images are shown as their text.

  const INLINE = /`([^`\n]+)`|!?\[([^\]\n]+)\]\(([^)\s]+)\)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\s][^*\n]*)\*/g;

  function linkTarget(target, citationCount) {
    const anchor = /^#citation-([1-9][0-9]*)$/.exec(target);
    if (anchor) {
      return Number(anchor[1]) <= citationCount ? target : null;
    }
    return /^https?:\/\/[^\s]+$/i.test(target) ? target : null;
  }

  function inlineNodes(text, citationCount) {
    const nodes = [];
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      if (match.index > last) {
        nodes.push(document.createTextNode(text.slice(last, match.index)));
      }
      const [whole, code, label, target, strong, strongUnderscore, em] = match;
      let node;
      if (code !== undefined) {
        node = document.createElement('code');
        node.textContent = code;
      } else if (label !== undefined) {
        const href = whole.startsWith('!') ? null : linkTarget(target, citationCount);
        if (href === null) {
          node = document.createTextNode(whole);
        } else {
          node = document.createElement('a');
          node.href = href;
          node.append(...inlineNodes(label, citationCount));
          if (href.startsWith('#')) {
            node.className = 'citation-anchor';
            node.setAttribute('aria-label', `Citation ${href.slice('#citation-'.length)}`);
          } else {
            node.rel = 'noopener noreferrer';
          }
        }
      } else {
        node = document.createElement(em !== undefined ? 'em' : 'strong');
        node.append(...inlineNodes(em !== undefined ? em : (strong !== undefined ? strong : strongUnderscore),
          citationCount));
      }
      nodes.push(node);
      last = match.index + whole.length;
    }
    if (last < text.length) {
      nodes.push(document.createTextNode(text.slice(last)));
    }
    return nodes;
  }

  function lineNodes(lines, citationCount) {
    const nodes = [];
    lines.forEach((line, index) => {
      if (index > 0) {
        nodes.push(document.createElement('br'));
      }
      nodes.push(...inlineNodes(line, citationCount));
    });
    return nodes;
  }

  function markdownNodes(markdown, citationCount) {
    const blocks = [];
    const lines = String(markdown).replace(/\r\n?/g, '\n').split('\n');
    let paragraph = [];
    let list = null;
    const flush = () => {
      if (paragraph.length) {
        const p = document.createElement('p');
        p.append(...lineNodes(paragraph, citationCount));
        blocks.push(p);
        paragraph = [];
      }
      list = null;
    };
    for (let i = 0; i < lines.length; i += 1) {
      const line = lines[i];
      if (/^\s*```/.test(line)) {
        flush();
        const code = [];
        for (i += 1; i < lines.length && !/^\s*```/.test(lines[i]); i += 1) {
          code.push(lines[i]);
        }
        const pre = document.createElement('pre');
        const inner = document.createElement('code');
        inner.textContent = code.join('\n');
        pre.append(inner);
        blocks.push(pre);
        continue;
      }
      const heading = /^\s{0,3}(#{1,6})\s+(.*)$/.exec(line);
      const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
      if (line.trim() === '') {
        flush();
      } else if (heading) {
        flush();
        // The answer sits under the page's h3/h4 headings, so its own start at h5.
        const h = document.createElement(heading[1].length === 1 ? 'h5' : 'h6');
        h.append(...inlineNodes(heading[2], citationCount));
        blocks.push(h);
      } else if (item) {
        if (paragraph.length) {
          const kept = list;
          flush();
          list = kept;
        }
        const tag = item[2] !== undefined ? 'ol' : 'ul';
        if (!list || list.tagName.toLowerCase() !== tag) {
          list = document.createElement(tag);
          blocks.push(list);
        }
        const li = document.createElement('li');
        li.append(...inlineNodes(item[3], citationCount));
        list.append(li);
      } else {
        if (list) {
          list = null;
        }
        paragraph.push(line);
      }
    }
    flush();
    return blocks;
  }

  function renderResult(result) {
    const citations = Array.isArray(result.citations) ? result.citations : [];
    const steps = Array.isArray(result.steps) ? result.steps : [];
    const graph = result.graph || {};
    const failed = steps.filter((item) => item.status === 'error').length;
    const nodes = Array.isArray(graph.nodes) ? graph.nodes.length : 0;
    const edges = Array.isArray(graph.edges) ? graph.edges.length : 0;
    let summary = `Completed (${result.orchestrationMode}): ${plural(citations.length, 'citation', 'citations')}, `
      + `graph ${plural(nodes, 'node', 'nodes')} and ${plural(edges, 'edge', 'edges')}.`;
    if (failed) {
      summary += ` ${plural(failed, 'step', 'steps')} reported an error; see the trace steps.`;
    }
    $('verify-summary').textContent = summary;
    $('verify-answer').replaceChildren(...markdownNodes(result.answer || '', citations.length));
    $('verify-citations').replaceChildren(...citations.map((citation, index) => {
      const item = listItem([
        ['citation-title', citation.title || 'Untitled'],
        ['citation-meta', [citation.id, citation.path].filter(Boolean).join(' · ')],
      ]);
      item.id = `citation-${index + 1}`;  // where the answer's [n](#citation-n) anchors lead
      item.tabIndex = -1;
      return item;
    }));
    if (citations.length === 0) {
      $('verify-citations').replaceChildren(listItem([['citation-meta', 'No citations were returned.']]));
    }
    $('verify-steps').replaceChildren(...steps.map((item) => {
      const li = listItem([['step-status', `${item.status}:`], ['step-label', item.label],
        ['citation-meta', item.detail || item.error || '']]);
      if (item.status === 'error') {
        li.classList.add('step-error');
      }
      return li;
    }));
    $('verify-result').hidden = false;
  }

  const ANSWER_DELTA = 'urn:llmwiki:a2a-extension:agent-bridge:v1#answerDelta';
  const SOURCE_STEP = 'urn:llmwiki:a2a-extension:agent-bridge:v1#sourceStep';

  // The run over A2A's stream (POST /message:stream): each source's step and the runtime's answer
  // show as they arrive; the result artifact then replaces the draft. Resolves with the result.
  async function streamRun(query, mode, onEvent) {
    const headers = {Accept: 'text/event-stream', 'Content-Type': 'application/json', 'A2A-Version': '1.0'};
    if (state.token !== null) {
      headers.Authorization = `Bearer ${state.token}`;
    }
    const body = {message: {messageId: `settings-${Date.now()}`, role: 'ROLE_USER',
      parts: [{text: query}, {data: {orchestrationMode: mode}}]}};
    let response;
    try {
      response = await fetch('/message:stream', {method: 'POST', headers, body: JSON.stringify(body),
        cache: 'no-store', credentials: 'omit', redirect: 'error'});
    } catch (_) {
      throw new BridgeError(0, 'network_error', 'The bridge could not be reached. Check that it is still running.');
    }
    if (!response.ok || !response.body) {
      let payload = null;
      try {
        payload = await response.json();
      } catch (_) {
        payload = null;
      }
      const error = payload && typeof payload.error === 'object' && payload.error ? payload.error : {};
      throw new BridgeError(response.status, String(error.code || `http_${response.status}`),
        String(error.message || `The bridge answered with HTTP ${response.status}.`));
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let result = null;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) {
        break;
      }
      buffer += value;
      let end = buffer.indexOf('\n\n');
      while (end !== -1) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of frame.split('\n')) {
          if (line.startsWith('data:')) {
            const event = JSON.parse(line.slice(5));
            if (event.artifactUpdate) {
              result = resultOf({artifacts: [event.artifactUpdate.artifact]}) || result;
            }
            const status = event.statusUpdate && event.statusUpdate.status;
            if (status && status.state === 'TASK_STATE_FAILED') {
              const parts = (status.message && status.message.parts) || [];
              throw new BridgeError(500, 'run_failed', String((parts[0] && parts[0].text) || 'The run failed.'));
            }
            onEvent(event);
          }
        }
        end = buffer.indexOf('\n\n');
      }
    }
    return result;
  }

  function showProgress(event, draft) {
    const message = event.statusUpdate && event.statusUpdate.status && event.statusUpdate.status.message;
    const kind = message && message.metadata && message.metadata.event;
    const part = message && Array.isArray(message.parts) ? message.parts[0] : null;
    if (kind === ANSWER_DELTA && part && typeof part.text === 'string') {
      draft.answer += part.text;
      $('verify-answer').textContent = draft.answer;  // plain text until the result arrives
    } else if (kind === SOURCE_STEP && part && part.data) {
      draft.sources += 1;
      draft.citations += Array.isArray(part.data.citations) ? part.data.citations.length : 0;
    } else {
      return;
    }
    $('verify-summary').textContent = `Running: ${plural(draft.sources, 'source', 'sources')} answered, `
      + `${plural(draft.citations, 'citation', 'citations')} so far${draft.answer ? '; the answer is arriving' : ''}.`;
    $('verify-result').hidden = false;
  }

  async function onVerifySubmit(event) {
    event.preventDefault();
    const query = $('verify-query').value.trim();
    if (query === '') {
      showError('Enter a question for the setup check.');
      $('verify-query').focus();
      return;
    }
    const mode = $('verify-mode').value;
    await whileBusy($('verify-run'), async () => {
      try {
        const draft = {answer: '', sources: 0, citations: 0};
        $('verify-answer').textContent = '';
        $('verify-citations').replaceChildren();
        $('verify-steps').replaceChildren();
        const result = await streamRun(query, mode, (update) => showProgress(update, draft));
        if (!result) {
          showError('The bridge answered, but without a result artifact.');
          return;
        }
        renderResult(result);
        const unsaved = state.rows.some((row) => isChanged(row)) || state.rows.length !== state.saved.length;
        announce(`Setup check finished with ${plural((result.citations || []).length, 'citation',
          'citations')}.${unsaved ? ' It used the saved sources, not your unsaved changes.' : ''}`);
      } catch (error) {
        $('verify-result').hidden = true;
        handleError('The setup check failed', error);
      }
    });
  }

  // ------------------------------------------------------------------ wiring

  document.addEventListener('DOMContentLoaded', () => {
    $('token-form').addEventListener('submit', onTokenSubmit);
    $('reload-overview').addEventListener('click', onReloadOverview);
    $('runtime-profile').addEventListener('change', onProfileChange);
    $('runtime-form').addEventListener('submit', onRuntimeSubmit);
    $('advanced-form').addEventListener('submit', onAdvancedSubmit);
    $('sources-form').addEventListener('submit', onSourcesSubmit);
    $('source-add').addEventListener('click', onAddSource);
    $('sources-discard').addEventListener('click', onDiscardSources);
    $('verify-form').addEventListener('submit', onVerifySubmit);
    start();
  });
})();
