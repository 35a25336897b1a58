"""The project's channel layer: channels-redis' own, plus one send for several groups at once.

A worker's group commit writes the projections of many conversations in one transaction; pushed one group at a
time, each conversation cost its sender four Redis round trips (trim and read the group, trim the channels, the
send script) and about half a millisecond of CPU, most of a streamed delta's cost (bench/RESULTS.md). Here the
groups of one write are read in one pipelined round trip and their messages delivered by one script per Redis
host, whatever their number. What a consumer receives is unchanged: one message per group, on the channels the
layer itself would have used, with its capacity and expiry.
"""

import time

from channels_redis.core import RedisChannelLayer

# The send script of channels-redis' group_send, with the channels' expiry trim folded in (a separate round trip
# there) and a key that may occur more than once (two groups with sockets of the same web process).
_SEND_TO_CHANNELS = """
local count = #KEYS
local now = ARGV[2 * count + 1]
local expiry = ARGV[2 * count + 2]
local expired = ARGV[2 * count + 3]
local over_capacity = 0
for i = 1, count do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, expired)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[count + i]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""


class GroupsChannelLayer(RedisChannelLayer):
    async def send_to_groups(self, messages: dict[str, dict]) -> None:
        """Each group's message ({group: message}) to the group's channels, as `group_send` would send it, in two
        round trips per Redis host."""
        members = await self._members(list(messages))
        by_connection: dict[int, tuple[list, list, list]] = {}
        for group, message in messages.items():
            channel_keys_of, message_of, capacity_of = self._map_channel_keys_to_connection(members[group], message)
            for index, channel_keys in channel_keys_of.items():
                keys, payloads, capacities = by_connection.setdefault(index, ([], [], []))
                keys.extend(channel_keys)
                payloads.extend(message_of[key] for key in channel_keys)
                capacities.extend(capacity_of[key] for key in channel_keys)
        now = time.time()
        for index, (keys, payloads, capacities) in by_connection.items():
            await self.connection(index).eval(
                _SEND_TO_CHANNELS,
                len(keys),
                *keys,
                *payloads,
                *capacities,
                now,
                self.expiry,
                int(now) - int(self.expiry),
            )

    async def _members(self, groups: list[str]) -> dict[str, list[str]]:
        """The unexpired channels of each group, trimming the expired ones, one pipeline per Redis host."""
        by_connection: dict[int, list[str]] = {}
        for group in groups:
            assert self.require_valid_group_name(group), "Group name not valid"
            by_connection.setdefault(self.consistent_hash(group), []).append(group)
        members = {}
        expired = int(time.time()) - self.group_expiry
        for index, hosted in by_connection.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for group in hosted:
                key = self._group_key(group)
                pipe.zremrangebyscore(key, min=0, max=expired)
                pipe.zrange(key, 0, -1)
            replies = await pipe.execute()
            for position, group in enumerate(hosted):
                members[group] = [name.decode("utf8") for name in replies[2 * position + 1]]
        return members
