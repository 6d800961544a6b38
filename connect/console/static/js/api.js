// The worker's REST API, as the console calls it: the Kafka Connect paths and Headwater's /admin ones,
// relative to the worker that served the console (whatever prefix a proxy put in front of /ui/).

const ROOT = location.pathname.slice(0, location.pathname.lastIndexOf("/ui/") + 1);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** One call; the parsed JSON answer (null when empty). A non-2xx answer throws an ApiError carrying the
 * worker's own message (the {"error_code", "message"} body). */
export async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let resp;
  try {
    resp = await fetch(ROOT + path.replace(/^\//, ""), init);
  } catch (err) {
    throw new ApiError(0, `The worker cannot be reached (${err.message})`);
  }
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!resp.ok) {
    const message = data && typeof data === "object" && data.message ? data.message : `${resp.status} ${resp.statusText}`;
    throw new ApiError(resp.status, message);
  }
  return data;
}

export const get = (path) => api("GET", path);

/** Text (not JSON): Prometheus' /metrics. */
export async function getText(path) {
  const resp = await fetch(ROOT + path.replace(/^\//, ""));
  if (!resp.ok) throw new ApiError(resp.status, `${resp.status} ${resp.statusText}`);
  return resp.text();
}

/** A path segment: connector, topic and group names may hold anything but "/". */
export const seg = encodeURIComponent;
