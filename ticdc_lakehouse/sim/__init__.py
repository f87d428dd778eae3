"""Demo and test data: the simulated upstream workload, the archive writer and the protocol encoders."""
