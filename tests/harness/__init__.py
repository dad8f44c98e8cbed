"""Test scaffolding shared by the tests and the robustness commands of bench/: fault injection and bad inputs."""
