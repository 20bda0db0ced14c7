"""How many examples each hypothesis test draws: BULKWIRE_HYPOTHESIS_EXAMPLES, 100 by default
(hypothesis' own default). A sanitizer run, ten times slower, asks for fewer; a long local run
can ask for more. Each run draws new examples (the seed is random), so the several runs of a
CI pass (full build, build without the optional libraries, sanitizers) add up."""
import os

EXAMPLES = int(os.environ.get("BULKWIRE_HYPOTHESIS_EXAMPLES", "100"))
