-- Shared functions of the mailbox scripts (docs/design.md §5.4, seed 004 §5). Included by
-- mailbox_begin/append/finish and by the fused script (one or more records); never
-- loaded alone. Errors are raised as {err = "QIM_<REASON> ..."} and stop the shard.

-- The owner fence (docs/decisions/0040-scale-leases-and-fencing.md): every write of a
-- shard owner carries the owner_epoch the ShardRegistry granted it; the shard's watermark
-- HASH holds (field oe) the epoch of the owner that fenced it last (mailbox_fence.lua,
-- before that owner's first write). Any other value is a stale owner: refuse before
-- anything is written. "0" is the fence of a shard no owner ever fenced (tools, tests).
local function qim_fenced(wm_key, fence)
  local oe = redis.call('HGET', wm_key, 'oe') or '0'
  if oe ~= fence then
    error({err = 'QIM_NOT_OWNER owner_epoch ' .. fence .. ' is stale: the shard is fenced at ' .. oe})
  end
end

-- begin_dispatch: DispatchProgress (digest, first mailbox_seq, first and highest observed
-- offset, state) and the shard's DP index (score = highest observed offset, for GC).
-- Returns status (FRESH | RESUME | DUPLICATE) and the mailbox_seq the entries use.
local function qim_begin(dp_key, dpidx_key, digest, offset, seq)
  local dp = redis.call('HMGET', dp_key, 'dg', 'seq', 'st', 'off', 'hi')
  if dp[1] then
    if dp[1] ~= digest then
      error({err = 'QIM_DIGEST_CONFLICT dispatch_id seen with another payload'})
    end
    local hi = math.max(tonumber(dp[5]), tonumber(offset))
    redis.call('HSET', dp_key, 'hi', string.format('%d', hi))
    redis.call('ZADD', dpidx_key, hi, dp_key)
    if dp[3] == 'DONE' then
      return 'DUPLICATE', dp[2]
    end
    return 'RESUME', dp[2]
  end
  redis.call('HSET', dp_key, 'dg', digest, 'seq', seq, 'off', offset, 'hi', offset, 'st', 'BEGUN')
  redis.call('ZADD', dpidx_key, tonumber(offset), dp_key)
  return 'FRESH', seq
end

-- The day index of the layout before docs/decisions/0064 was a HASH (day -> highest
-- offset, "trim"): moved in place into the sorted set that replaced it, under the same
-- key, keeping its expiry. The same key on purpose: a node of the older release meets a
-- sorted set there and fails with WRONGTYPE (its shard stalls, its pulls fail) instead
-- of reading an index that misses the days written since. Returns the fields moved.
local function qim_index_migrate(days_key)
  if redis.call('TYPE', days_key).ok ~= 'hash' then
    return 0
  end
  local old = redis.call('HGETALL', days_key)
  local ttl = redis.call('PTTL', days_key)
  redis.call('DEL', days_key)
  for i = 1, #old, 2 do
    redis.call('ZADD', days_key, 'GT', old[i + 1], old[i])
  end
  if ttl > 0 then
    redis.call('PEXPIRE', days_key, ttl)
  end
  return #old / 2
end

-- The day's highest offset into the user's day index (the trim boundary is derived from
-- it). The index is a sorted set (docs/decisions/0064-day-index-sorted-set.md): ZADD GT
-- keeps the day's maximum in one command, and its expiry moves only when the day is new
-- to it (the index then outlives that day's bucket: index ttl > a day + retention). An
-- index still of the old layout is moved first (pcall: the one WRONGTYPE expected here).
local function qim_index_day(days_key, offset, day, index_ttl)
  local added = redis.pcall('ZADD', days_key, 'GT', offset, day)
  if type(added) == 'table' and added.err then
    if qim_index_migrate(days_key) == 0 then
      error(added)
    end
    added = redis.call('ZADD', days_key, 'GT', offset, day)
  end
  if added == 1 then
    redis.call('EXPIRE', days_key, index_ttl)
  end
end

-- append: one recipient's event group into its day bucket and the day into its index.
-- The bucket's EXPIREAT is set on every append: a bucket emptied or dropped while its
-- day is still indexed must not come back without an expiry.
local function qim_append(bucket_key, days_key, member, offset, day, expire_at, index_ttl)
  redis.call('ZADD', bucket_key, offset, member)
  redis.call('EXPIREAT', bucket_key, expire_at)
  qim_index_day(days_key, offset, day, index_ttl)
end

-- The watermark check of a fused call, made before it writes anything: true when W is
-- `expected_wm` (write it), false when W already is `new_wm` written by this same
-- non-empty `writer` (this very call applied before and its reply was lost: the entries
-- and DispatchProgress are idempotent, W is not written again), else QIM_WM_CONFLICT
-- (another writer: two owners) with nothing written.
local function qim_wm_check(wm_key, expected_wm, new_wm, writer)
  local wm = redis.call('HMGET', wm_key, 'blob', 'writer')
  local current = wm[1] or ''
  if current == expected_wm then
    return true
  end
  if writer ~= '' and current == new_wm and wm[2] == writer then
    return false
  end
  error({err = 'QIM_WM_CONFLICT watermark moved under us'})
end

-- finish_dispatch: completion and the packed watermark, compare-and-set against the
-- blob this node wrote last (another writer of W means two owners: stop). `writer`
-- names the materializer incarnation and is stored beside the blob: when W already is
-- `new_wm` written by this same writer, this very finish applied before and its reply
-- was lost (a client timeout, a retry): nothing to do. Only that writer's own write is
-- recognised, so a second owner that wrote the same blob still stops the shard.
-- Returns 1 when it wrote W now, 0 when it recognised its own earlier write.
local function qim_finish(dp_key, wm_key, expected_wm, new_wm, epoch, writer)
  writer = writer or ''
  local wm = redis.call('HMGET', wm_key, 'blob', 'writer')
  local current = wm[1] or ''
  if current ~= expected_wm then
    if writer ~= '' and current == new_wm and wm[2] == writer then
      if redis.call('EXISTS', dp_key) == 1 then  -- begun again after a GC: complete it
        redis.call('HSET', dp_key, 'st', 'DONE')
      end
      return 0
    end
    error({err = 'QIM_WM_CONFLICT watermark moved under us'})
  end
  redis.call('HSET', dp_key, 'st', 'DONE')
  redis.call('HSET', wm_key, 'blob', new_wm, 'layout', '1', 'epoch', epoch, 'writer', writer)
  return 1
end

-- Inline pushes (docs/decisions/0156): the highest offset below `offset` among a user's
-- entries: its bucket of `day` read (one ZREVRANGEBYSCORE), every other day of its index
-- by the day's highest offset (a day wholly below `offset` needs no read) and the trim
-- boundary (a pull from it is served, from below it is not). -1: none; -2: another day
-- holds an offset at or above `offset` (created_at out of offset order near midnight):
-- unknown, the caller pushes the position only.
local function qim_prev_offset(bucket, days_key, day, offset_arg)
  local offset, best = tonumber(offset_arg), -1
  -- the argument's own digits: a Lua number above 1e14 would print in exponent form
  local row = redis.call('ZREVRANGEBYSCORE', bucket, '(' .. offset_arg, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if row[2] then
    best = tonumber(row[2])
  end
  local ok, index = pcall(redis.call, 'ZRANGE', days_key, 0, -1, 'WITHSCORES')
  if not ok then
    return -2  -- an index of the old layout (a HASH): not read here
  end
  for i = 1, #index, 2 do
    if index[i] ~= day then
      local hi = tonumber(index[i + 1])
      if hi >= offset then
        return -2
      end
      if hi > best then
        best = hi
      end
    end
  end
  return best
end
