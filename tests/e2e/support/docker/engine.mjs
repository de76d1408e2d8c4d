// The state of one engine: the images it knows, its containers, and its
// record of every call and of every part of the Engine API asked for that
// this stand-in does not model. Tests start several stand-ins at once, so
// the state lives in this object, which the other modules are handed,
// never in a module.

/** An Engine API error: answered with its status and `{"message": ...}`. */
export class DockerError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A stable image ID for an image name. */
export const imageId = (image) => `sha256:${Buffer.from(image).toString("hex").padEnd(64, "0").slice(0, 64)}`;

/** Whether the engine counts container `c` as up: what stop, delete, kill and wait check. */
export const isUp = (c) => c.status === "running" || c.status === "restarting" || c.status === "paused";

export class Engine {
  constructor({ images, egressImage }) {
    this.egressImage = egressImage;
    /** Image name -> entrypoint kind (see entrypoints.mjs). */
    this.imageKinds = new Map(Object.entries(images));
    /** Name -> container, in creation order. */
    this.containers = new Map();
    /** Every call: { method, path, status, image?, sent }. */
    this.calls = [];
    /** What was asked for that this stand-in does not model. */
    this.unknown = [];
  }

  /** What a container of `image` runs: "proxy" for the egress image, else its entrypoint kind; undefined for an unknown image. */
  kindOf(image) {
    return image === this.egressImage ? "proxy" : this.imageKinds.get(image);
  }

  /** A container by name, ID or ID prefix of at least 12 characters, as the API takes it; undefined when none. */
  find(ref) {
    return this.containers.get(ref) ?? [...this.containers.values()].find((c) => c.id === ref || (ref.length >= 12 && c.id.startsWith(ref)));
  }

  /** `find`, or Docker's 404. */
  byName(ref) {
    const found = this.find(ref);
    if (!found) throw new DockerError(404, `No such container: ${ref}`);
    return found;
  }

  /** A part of the Engine API this stand-in does not model: recorded, and refused. */
  unmodelled(what) {
    this.unknown.push(what);
    return new DockerError(404, `not modelled by this stand-in: ${what}`);
  }
}
