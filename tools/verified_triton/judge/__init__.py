"""judge: the evidence format and the one judgement of it; imports core only."""
