"""Transport interop: ICE host addresses and servers, DTLS role and failure reasons, DSCP marking."""
