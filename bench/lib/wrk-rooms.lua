-- The load of bench/compare.mjs, for wrk 4: one endpoint per run, the room
-- endpoints spread over COMPARE_ROOMS rooms (request n of thread t goes to
-- room (n * COMPARE_THREADS + t) % COMPARE_ROOMS). At the end it prints one
-- line, "WRK_JSON {...}", with the run's counts, errors and latency
-- percentiles in microseconds.
--
--   COMPARE_MODE     health | message | exec | history (GET /messages)
--   COMPARE_ROOMS    rooms to spread over (default 50)
--   COMPARE_PREFIX   room ids are "<prefix>-<n>" (default "bench")
--   COMPARE_THREADS  wrk's -t (default 2)
--   COMPARE_TOKENS   bearer tokens, comma-separated: one per room, in the
--                    rooms' order, or one for every room (default none)
local mode = os.getenv("COMPARE_MODE") or "health"
local rooms = tonumber(os.getenv("COMPARE_ROOMS") or "50")
local prefix = os.getenv("COMPARE_PREFIX") or "bench"
local threads = tonumber(os.getenv("COMPARE_THREADS") or "2")
local tokens = {}
for token in string.gmatch(os.getenv("COMPARE_TOKENS") or "", "[^,]+") do
  tokens[#tokens + 1] = token
end

local started = 0
function setup(thread)
  thread:set("tid", started)
  started = started + 1
end

local headers = { ["Content-Type"] = "application/json" }
local n = 0

-- The headers of a request to room number k (0-based).
local function headers_for(k)
  if #tokens == 0 then
    return headers
  end
  return { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[(k % #tokens) + 1] }
end

if mode == "health" then
  wrk.method = "GET"
  wrk.path = "/health"
elseif mode == "message" then
  function request()
    n = n + 1
    local t = tid or 0
    local k = (n * threads + t) % rooms
    return wrk.format("POST", "/api/rooms/" .. prefix .. "-" .. k .. "/message", headers_for(k), '{"text":"bench ' .. t .. "-" .. n .. '"}')
  end
elseif mode == "exec" then
  local body = '{"cmd":"true"}'
  function request()
    n = n + 1
    local k = (n * threads + (tid or 0)) % rooms
    return wrk.format("POST", "/api/rooms/" .. prefix .. "-" .. k .. "/sandbox/exec", headers_for(k), body)
  end
elseif mode == "history" then
  function request()
    n = n + 1
    local k = (n * threads + (tid or 0)) % rooms
    return wrk.format("GET", "/api/rooms/" .. prefix .. "-" .. k .. "/messages", headers_for(k))
  end
else
  error("COMPARE_MODE must be health, message, exec or history")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"durationUs":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
