-- wrk script of scripts/bench-http.sh: POSTs a connect of a distinct user
-- per request (thread number and counter, plus SALT so rounds never
-- reconnect an earlier round's user) with the admin token, and prints the
-- figures as one JSON line at the end.
local counter = 0
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
end
function request()
  counter = counter + 1
  return wrk.format(nil, os.getenv("BENCH_PATH"), nil,
    '{"user":"u' .. tid .. "-" .. counter .. "-" .. os.getenv("BENCH_SALT") .. '@bench"}')
end
function done(summary, latency, requests)
  io.write(string.format(
    "RESULT %.0f %.3f %.3f %.3f %.3f %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout,
    summary.requests))
end
