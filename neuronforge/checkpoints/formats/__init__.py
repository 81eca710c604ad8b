"""Writers of the published formats that consumers load (LMI serving configs, Optimum layout)."""
