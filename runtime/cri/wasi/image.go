package wasi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/runtime/cri/images"
)

func toCRIImage(im images.Image) *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          im.ID,
		RepoTags:    im.RepoTags,
		RepoDigests: im.RepoDigests(),
		Size:        uint64(im.Size),
		Spec:        &runtimeapi.ImageSpec{Image: im.ID},
		Pinned:      false,
	}
}

func (s *Server) listImages(f *runtimeapi.ImageFilter) []*runtimeapi.Image {
	var want *images.Image
	if ref := f.GetImage().GetImage(); ref != "" {
		im, err := s.images.Resolve(ref)
		if err != nil {
			return nil
		}
		want = &im
	}
	var out []*runtimeapi.Image
	for _, im := range s.images.List() {
		if want != nil && im.ID != want.ID {
			continue
		}
		out = append(out, toCRIImage(im))
	}
	return out
}

// ListImages lists the stored images; the filter's image is any reference Resolve accepts.
func (s *Server) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: s.listImages(req.GetFilter())}, nil
}

// StreamImages sends the ListImages result in chunks.
func (s *Server) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	return sendChunks(s.listImages(req.GetFilter()), "images", func(chunk []*runtimeapi.Image) error {
		return stream.Send(&runtimeapi.StreamImagesResponse{Images: chunk})
	})
}

// ImageStatus returns the image, or a nil image when the store does not hold it (as the
// CRI asks).
func (s *Server) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	im, err := s.images.Resolve(req.GetImage().GetImage())
	if err != nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: toCRIImage(im)}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"format":"wasm","os":"wasip1","arch":"wasm","blob":%q,"created":%q}`, s.images.BlobPath(im.ID), im.Created.Format("2006-01-02T15:04:05Z07:00"))}
	}
	return resp, nil
}

// PullImage resolves a reference the store already holds, or imports file:///abs/path.wasm
// (tagged with the path's base name without extension); there is no registry client.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if strings.HasPrefix(ref, "file://") {
		u, err := url.Parse(ref)
		if err != nil || u.Path == "" {
			return nil, status.Errorf(codes.InvalidArgument, "bad file reference %q: want file:///abs/path.wasm", ref)
		}
		im, err := s.images.ImportFile(ctx, u.Path)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "import %s: %v", u.Path, err)
		}
		return &runtimeapi.PullImageResponse{ImageRef: im.ID}, nil
	}
	im, err := s.images.Resolve(ref)
	if errors.Is(err, images.ErrNotFound) {
		return nil, notInStore(ref)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "resolve %q: %v", ref, err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: im.ID}, nil
}

// RemoveImage removes the image with all its tags; removing a missing image is not an error.
func (s *Server) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	im, err := s.images.Resolve(ref)
	if err != nil {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if err := s.images.Remove(im.ID); err != nil {
		return nil, status.Errorf(codes.Internal, "remove image %q: %v", ref, err)
	}
	s.forgetCompiled(im.ID)
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the image store's usage.
func (s *Server) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	used, files := s.images.Usage()
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  nowNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.images.Root()},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: files},
		}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  nowNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.root + "/containers"},
			UsedBytes:  &runtimeapi.UInt64Value{},
			InodesUsed: &runtimeapi.UInt64Value{},
		}},
	}, nil
}
