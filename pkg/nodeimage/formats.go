package nodeimage

// DockerRepository is where the docker format's images are tagged, one tag
// per Kubernetes version.
const DockerRepository = "hwk/node"

// LabelKey marks a docker-format image with its build's input key, so a
// cached build can tell the engine still holds exactly that image.
const LabelKey = "dev.hwk.node-image.key"
