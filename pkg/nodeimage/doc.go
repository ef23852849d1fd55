// Package nodeimage describes hwk's node images: the Manifest of a cached
// image and its Artifacts, the Formats each driver boots from, the cache
// (List, Select, ReadManifest), the build's Options and WindowsOptions,
// and NoImageError. internal/nodeimage/build makes the images.
package nodeimage
