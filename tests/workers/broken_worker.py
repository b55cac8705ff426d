#!/usr/bin/env python3
"""A deliberately broken crossbench worker, for fault-injection tests.

It is the real PyTorch worker (src/workers/pytorch/worker.py) except for the
cells of one network, where it misbehaves on command when asked to run steps:

  --fault crash     the process dies (exit status 3) after a line on stderr
  --fault hang      it stops answering (sleeps far past any time limit)
  --fault garbage   it answers with a line that is not JSON
  --fault protocol  it says hello with protocol 99 (every cell then fails)
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "workers"))

from common.protocol import serve  # noqa: E402
from pytorch.worker import PytorchAdapter  # noqa: E402


class BrokenAdapter(PytorchAdapter):
    def __init__(self, fault, network):
        super().__init__(compile_model=False)
        self.fault, self.network = fault, network

    def hello(self):
        hello = super().hello()
        if self.fault == "protocol":
            hello["protocol"] = 99
        return hello

    def prepare(self, request):
        session = super().prepare(request)
        if request["cell"]["network"] == self.network:
            original_run_steps = session.run_steps

            def broken_run_steps(count, time_limit_s, warmup):
                if self.fault == "crash":
                    print("broken worker: crashing on purpose", file=sys.stderr, flush=True)
                    os._exit(3)
                if self.fault == "hang":
                    print("broken worker: hanging on purpose", file=sys.stderr, flush=True)
                    time.sleep(1e6)
                if self.fault == "garbage":
                    print("broken worker: writing garbage on purpose", file=sys.stderr, flush=True)
                    self.protocol_out.write("this is not a JSON reply\n")
                    self.protocol_out.flush()
                    time.sleep(1e6)
                return original_run_steps(count, time_limit_s, warmup)

            session.run_steps = broken_run_steps
        return session


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fault", choices=["crash", "hang", "garbage", "protocol"], required=True)
    parser.add_argument("--on-network", default="googlenet", help="the network whose cells misbehave")
    arguments = parser.parse_args()
    serve(BrokenAdapter(arguments.fault, arguments.on_network))


if __name__ == "__main__":
    main()
