/** The range of time a page shows: a preset in the operator's time zone, or custom dates picked with date inputs. */
import { valueOf } from '../hooks.js';
import { PRESETS, type Preset, type RangeChoice } from '../ranges.js';
import { Input, Select } from '../ui.js';

export function RangePicker(props: { value: RangeChoice; onChange: (next: RangeChoice) => void; presets?: Preset[] }) {
  const { value, onChange } = props;
  const offered = props.presets ?? (Object.keys(PRESETS) as Preset[]);
  return (
    <>
      <Select
        label="Range"
        name="range"
        choices={Object.fromEntries(offered.map((p) => [p, PRESETS[p]]))}
        value={value.preset}
        onChange={(e) => onChange({ ...value, preset: valueOf(e) as Preset })}
      />
      {value.preset === 'custom' ? (
        <>
          <Input
            label="From (day)"
            name="from"
            type="date"
            required
            value={value.from}
            max={value.to || undefined}
            onChange={(e) => onChange({ ...value, from: valueOf(e) })}
          />
          <Input
            label="To (day, included)"
            name="to"
            type="date"
            required
            value={value.to}
            min={value.from || undefined}
            onChange={(e) => onChange({ ...value, to: valueOf(e) })}
          />
        </>
      ) : null}
    </>
  );
}
