/**
 * The table under the usage chart: the chart's numbers without a hover, a row per day (or hour) of the range, a
 * column per series (the chart's: the largest keys, then "Other"), and the row's total.
 */
import type { UsageSummaryDto } from '../api.js';
import { axisZone, METRICS, seriesOf, type Metric } from './usage-chart.js';

export function PerPeriodTable(props: {
  summary: UsageSummaryDto;
  metric: Metric;
  labelOf: (key: string) => string;
  format: (v: number) => string;
}) {
  const { summary, metric, labelOf, format } = props;
  const { keys, starts, rows } = seriesOf(summary, metric);
  const daily = summary.granularity === 'day';
  const zone = axisZone(summary);
  const when = new Intl.DateTimeFormat(undefined, {
    timeZone: zone,
    ...(daily ? { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric' } : { dateStyle: 'medium', timeStyle: 'short' }),
  });
  const what = metric === 'cost' ? `Spend (${summary.currency})` : METRICS[metric];
  const total = (i: number) => rows.reduce((sum, row) => sum + row[i]!, 0);
  // Worded apart from the toolbar's labels (Range, Per, By, Show), which a label's text is found by.
  const caption = `${daily ? "Each day's" : "Each hour's"} ${what.charAt(0).toLowerCase()}${what.slice(1)} (${zone})`;
  return (
    // Focusable, so a keyboard scrolls it too.
    <div class="table-scroll" tabIndex={0} role="region" aria-label={caption}>
      <table data-testid="per-period-table">
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">{daily ? 'Day' : 'Hour'}</th>
            {keys.map((k) => (
              <th key={k} scope="col" class="num">
                {labelOf(k) || '(none)'}
              </th>
            ))}
            <th scope="col" class="num">
              Total
            </th>
          </tr>
        </thead>
        <tbody>
          {starts.map((start, i) => (
            <tr key={start}>
              <th scope="row">{when.format(start * 1000)}</th>
              {rows.map((row, k) => (
                <td key={keys[k]} class="num">
                  {format(row[i]!)}
                </td>
              ))}
              <td class="num">{format(total(i))}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
