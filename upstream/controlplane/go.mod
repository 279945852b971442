module controlloop/upstream/controlplane

go 1.26.0
