/**
 * A refusal of an operator action (review, OAC decision, delivery report), with a code that the
 * CLI prints and the admin API (src/admin) answers with its HTTP status.
 */
export type OperatorErrorCode = "not_found" | "invalid_state" | "reason_required" | "release_incomplete";

export const OPERATOR_ERROR_STATUS: Record<OperatorErrorCode, number> = {
  not_found: 404,
  invalid_state: 409,
  reason_required: 400,
  release_incomplete: 422,
};

export class OperatorError extends Error {
  readonly code: OperatorErrorCode;
  /** What the checks found, for release_incomplete. */
  readonly problems: { param: string; code: string; message: string }[];

  constructor(
    code: OperatorErrorCode,
    message: string,
    problems: { param: string; code: string; message: string }[] = [],
  ) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.problems = problems;
  }
}
