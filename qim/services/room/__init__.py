"""RoomWriter (qim-room): chatrooms by room_id with room_seq and a replay ring (docs/decisions/0035-rooms-roomwriter.md)."""
