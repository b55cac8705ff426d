#!/usr/bin/env python3
"""The real PyTorch worker (src/workers/pytorch/worker.py), which also appends every
`steps` request it gets to a file as one JSON line {"count", "warmup"} (and each `release` as
{"release": true}): the tests
read back the batches the Runner asked for (tests/python/test_worker_protocol.py).
With --settings, it appends every `prepare` request's `settings` object to another
file (tests/python/test_worker_settings.py).

  recording_worker.py --record FILE [--settings FILE]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "workers"))

from common.protocol import serve  # noqa: E402
from pytorch.worker import PytorchAdapter  # noqa: E402


class RecordingAdapter(PytorchAdapter):
    def __init__(self, record, settings=None):
        super().__init__(compile_model=False)
        self.record = record
        self.settings = settings

    def prepare(self, request):
        if self.settings:
            with open(self.settings, "a", encoding="utf-8") as log:
                log.write(json.dumps(request.get("settings")) + "\n")
        session = super().prepare(request)
        original_run_steps = session.run_steps

        def recorded_run_steps(count, time_limit_s, warmup):
            with open(self.record, "a", encoding="utf-8") as log:
                log.write(json.dumps({"count": count, "warmup": warmup}) + "\n")
            return original_run_steps(count, time_limit_s, warmup)

        session.run_steps = recorded_run_steps
        original_release = session.release

        def recorded_release():
            with open(self.record, "a", encoding="utf-8") as log:
                log.write(json.dumps({"release": True}) + "\n")
            original_release()

        session.release = recorded_release
        return session


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", required=True, help="file that gets one JSON line per steps request")
    parser.add_argument("--settings", help="file that gets each prepare request's settings, one JSON line each")
    arguments = parser.parse_args()
    serve(RecordingAdapter(arguments.record, arguments.settings))


if __name__ == "__main__":
    main()
