// The Workers AI service's failures, as it answers them: an HTTP error
// status, and a body that names the error (`AiError`), its internal code
// and a description. workerd's binding throws that as
// "<code>: <description>".

/** A failure of the service, answered with `status`. */
export class AiError extends Error {
  constructor(code, description, status = 400, why = description) {
    super(`${code}: ${why}`);
    Object.assign(this, { code, description, status });
  }
}
