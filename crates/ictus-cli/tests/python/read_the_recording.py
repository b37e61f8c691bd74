"""Reads an ictus recording (docs/recording.md) with Foxglove's `mcap` package and
prints what it found as one JSON document: the channels and their schemas, the
messages per topic, the `ictus` metadata's keys, and the `int` element of the
first `cells/A` message decoded by the documented CDR layout."""

import json
import struct
import sys

from mcap.reader import make_reader


def main(path):
    with open(path, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        channels = {
            c.topic: {
                "message_encoding": c.message_encoding,
                "schema_name": summary.schemas[c.schema_id].name,
                "schema_encoding": summary.schemas[c.schema_id].encoding,
                "schema": summary.schemas[c.schema_id].data.decode(),
            }
            for c in summary.channels.values()
        }
        counts = {}
        first_a = None
        frame = None
        for schema, channel, message in reader.iter_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if channel.topic == "cells/A" and first_a is None:
                data = message.data
                assert data[:4] == b"\x00\x01\x00\x00", data[:4]
                # `int` is the first element, an int32: at body offset 0.
                first_a = {
                    "int": struct.unpack_from("<i", data, 4)[0],
                    "sequence": message.sequence,
                    "log_time": message.log_time,
                }
            if channel.topic == "frames" and frame is None:
                frame = json.loads(message.data)
        metadata = {m.name: sorted(m.metadata.keys()) for m in reader.iter_metadata()}
    print(
        json.dumps(
            {
                "channels": channels,
                "counts": counts,
                "first_a": first_a,
                "frame": frame,
                "metadata": metadata,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
