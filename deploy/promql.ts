/**
 * The metric names a PromQL expression reads, and the label matchers it puts on each, so tests can
 * check that the Grafana dashboard and docs/operations.md query metrics the code exports.
 * Not a PromQL parser: it handles what those queries use (functions, aggregations with by/without,
 * binary operators, label matchers, range selectors, numbers, strings, Grafana variables).
 */

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'inf',
  'nan',
  'Inf',
  'NaN',
]);

function withoutNoise(expr: string): string {
  return expr
    .replace(/\$\{\w+\}|\$\w+/g, 'x0') // Grafana variables ($__rate_interval, ${datasource}): inside strings and ranges
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
}

/** The metric names `expr` selects (not functions, keywords, label names or numbers). */
export function metricNames(expr: string): string[] {
  const text = withoutNoise(expr).replace(/\{[^}]*\}/g, '');
  const names = new Set<string>();
  for (const match of text.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const start = match.index;
    const before = text[start - 1] ?? '';
    if (/[0-9.]/.test(before)) continue; // 1e-9, 5m
    if (
      text
        .slice(start + match[0].length)
        .trimStart()
        .startsWith('(')
    )
      continue; // a function or aggregation
    if (KEYWORDS.has(match[0]) || match[0] === 'x0') continue;
    names.add(match[0]);
  }
  return [...names];
}

/** Each `metric{…}` selector in `expr`: the metric and the label names it matches on. */
export function labelMatchers(expr: string): { metric: string; labels: string[] }[] {
  const text = withoutNoise(expr);
  const found: { metric: string; labels: string[] }[] = [];
  for (const match of text.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)) {
    const labels = [...match[2]!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((label) => label[1]!);
    found.push({ metric: match[1]!, labels });
  }
  return found;
}

/** A Grafana query variable's query: `label_values(metric{…}, label)` reads `metric`. */
export function variableQueryMetrics(query: string): string[] {
  const labelValues = /^\s*label_values\(\s*(.+)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/.exec(query);
  return metricNames(labelValues ? labelValues[1]! : query);
}
