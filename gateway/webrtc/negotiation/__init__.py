"""SDP: the offer checks, the rules that make an offer answerable, and codec/profile choices in the answer."""
