"""HTTP handlers (thin: validate, delegate) and the typed app keys they share."""
