"""RoomWriter (qim-room): chatrooms by room_id with room_seq and a replay ring (docs/decisions/0045-rooms-phase-one-in-process-ring.md)."""
