// Network namespaces. A container has its own, or joins another container's
// (`HostConfig.NetworkMode` "container:<name>"), as the Sandbox container
// joins its egress sidecar's. A namespace is the ports listening in it,
// each mapped to the loopback port that stands for it on this host.

/** A fresh namespace: nothing listens in it. */
export const newNamespace = () => ({ ports: new Map() });

/** The name of the container whose namespace a container with `hostConfig` joins; null when it has its own. */
export function joinedName(hostConfig) {
  const mode = hostConfig.NetworkMode ?? "";
  return mode.startsWith("container:") ? mode.slice("container:".length) : null;
}

/** The container owning the namespace `c` lives in: the one it joins, or itself. */
export function namespaceOwner(engine, c) {
  const joined = joinedName(c.hostConfig);
  return joined === null ? c : engine.byName(joined);
}
