import { useId } from "react";
import { setSearch } from "../router.tsx";

/** A choice: its value, or [value, text shown] when the text differs. */
export type Choice = string | readonly [value: string, text: string];

/**
 * A labelled list filter kept in the address's query (`?param=value`), so a filtered page can be
 * reloaded or shared; choosing replaces the history entry rather than adding one.
 */
export function SearchSelect({
  label,
  param,
  value,
  choices,
  testid,
}: {
  label: string;
  param: string;
  value: string;
  choices: readonly Choice[];
  testid: string;
}) {
  const id = useId();
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <SearchSelectInput id={id} param={param} value={value} choices={choices} testid={testid} />
    </div>
  );
}

/** The select of a SearchSelect alone, for a field whose label names either of two inputs. */
export function SearchSelectInput({
  id,
  param,
  value,
  choices,
  testid,
}: {
  id: string;
  param: string;
  value: string;
  choices: readonly Choice[];
  testid: string;
}) {
  return (
    <select
      id={id}
      value={value}
      onChange={(e) => setSearch({ [param]: e.target.value }, { replace: true })}
      data-testid={testid}
    >
      {choices.map((c) => {
        const [v, text] = typeof c === "string" ? [c, c] : c;
        return (
          <option key={v} value={v}>
            {text}
          </option>
        );
      })}
    </select>
  );
}

/** A free-text filter kept in the address's query, applied when the field is left or on Enter. */
export function SearchText({
  id,
  param,
  value,
  placeholder,
  testid,
}: {
  id: string;
  param: string;
  value: string;
  placeholder?: string;
  testid: string;
}) {
  return (
    <input
      id={id}
      defaultValue={value}
      placeholder={placeholder}
      onBlur={(e) => setSearch({ [param]: e.target.value.trim() }, { replace: true })}
      onKeyDown={(e) => {
        if (e.key === "Enter") setSearch({ [param]: e.currentTarget.value.trim() }, { replace: true });
      }}
      data-testid={testid}
    />
  );
}
