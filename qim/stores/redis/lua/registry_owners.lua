-- ShardRegistry.owners: every shard lease of a kind and its owner's address, in one call
-- (a pipeline of one HMGET per shard cost the reading process ~16 µs per reply, and every
-- gateway, mailbox and session node reads the table every second).
-- KEYS: the kind's shard HASHes in shard order. ARGV: 1 the kind's node HASH key prefix
-- (keys.py registry_node_key without the node id): the owners are known only once the
-- shard HASHes are read, so their node HASHes are named here; the registry is one Redis
-- instance (its keys carry no hash tag), never a cluster.
-- Returns {now ms, {node, epoch, exp, since per shard...}, {node id, addr, exp per owner...}}
-- (a missing field is a nil reply).
--#include registry_lib
local now = qim_now()
local rows, seen, nodes = {}, {}, {}
for i = 1, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'node', 'epoch', 'exp', 'since')
  for j = 1, 4 do rows[#rows + 1] = r[j] end
  local node = r[1]
  if node and node ~= '' and not seen[node] then
    seen[node] = true
    local n = redis.call('HMGET', ARGV[1] .. node, 'addr', 'exp')
    nodes[#nodes + 1] = node
    nodes[#nodes + 1] = n[1]
    nodes[#nodes + 1] = n[2]
  end
end
return {now, rows, nodes}
